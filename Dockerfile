# netaware: one image for every component (`netaware run|webhook|extender|...`).
# Multi-stage: build a wheel with its dependencies, install it into a slim runtime as a non-root user.
# The base is pinned to an exact version; pin its digest too when building for production
# (`docker buildx imagetools inspect python:3.11.11-slim-bookworm`), which this project's VMs cannot resolve.
ARG BASE=python:3.11.11-slim-bookworm
FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operators ./operators
COPY webhooks ./webhooks
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${BASE}
RUN groupadd --gid 65532 netaware && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin netaware
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels netaware && rm -rf /wheels
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
ENTRYPOINT ["netaware"]
CMD ["--help"]
