# netaware: one image for every component (`netaware run|webhook|extender|...`).
# Multi-stage: build the wheel, install it into a slim runtime as a non-root user, with every dependency
# pinned by hash (requirements/image.lock, pip --require-hashes).
# BASE is an exact version; production builds pin its digest as well, which this project's VMs cannot
# resolve (no registry access):
#   docker buildx imagetools inspect python:3.11.11-slim-bookworm   # prints the sha256 digest
#   docker build --build-arg BASE=python:3.11.11-slim-bookworm@sha256:<digest> .
ARG BASE=python:3.11.11-slim-bookworm
FROM ${BASE} AS build
WORKDIR /src
COPY requirements/image.lock ./
RUN pip download --no-cache-dir --require-hashes --dest /wheels -r image.lock
COPY pyproject.toml README.md ./
COPY operators ./operators
COPY webhooks ./webhooks
# bundled as data (operators.bundled): the CRDs, the example cluster and the default configurations
COPY crds ./crds
COPY hack/examples ./hack/examples
COPY hack/configs ./hack/configs
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM ${BASE}
# nft: the node agent's egress classifier (nftables map); the other components do not call it.
RUN apt-get update && apt-get install -y --no-install-recommends nftables && rm -rf /var/lib/apt/lists/*
RUN groupadd --gid 65532 netaware && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin netaware
COPY --from=build /wheels /wheels
COPY requirements/image.lock /tmp/image.lock
RUN pip install --no-cache-dir --no-index --find-links /wheels --require-hashes -r /tmp/image.lock \
    && pip install --no-cache-dir --no-index --no-deps --find-links /wheels netaware \
    && rm -rf /wheels /tmp/image.lock
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
ENTRYPOINT ["netaware"]
CMD ["--help"]
