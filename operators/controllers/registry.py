"""One kopf registry with every controller, and the settings they share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kopf

from operators.api import keys
from operators.api.config.controllers import ControllerOptions
from operators.controllers import appgroup, networktopology, nodeslo
from operators.kube import ApiClientFactory, cluster_api_client

COMPONENTS: dict[str, Callable[[kopf.OperatorRegistry, ControllerOptions], None]] = {
    "appgroup": lambda registry, _options: appgroup.register(registry),
    "networktopology": lambda registry, options: networktopology.register(registry, options.networktopology),
    "nodeslo": lambda registry, options: nodeslo.register(registry, options.nodeslo),
}


def build_registry(
    components: tuple[str, ...] = tuple(COMPONENTS),
    api_client_factory: ApiClientFactory = cluster_api_client,
    options: ControllerOptions | None = None,
) -> kopf.OperatorRegistry:
    """A registry with the chosen controllers and the kubernetes-asyncio client they share (``memo.api``)."""
    registry = kopf.OperatorRegistry()
    for name in components:
        COMPONENTS[name](registry, options or ControllerOptions())

    @kopf.on.startup(id="api_client", registry=registry)
    async def open_api_client(memo: kopf.Memo, **_: Any) -> None:
        memo.api = await api_client_factory()

    @kopf.on.cleanup(id="api_client", registry=registry)
    async def close_api_client(memo: kopf.Memo, **_: Any) -> None:
        api = getattr(memo, "api", None)
        if api is not None:
            await api.close()

    return registry


def configure(settings: kopf.OperatorSettings) -> None:
    """Our own annotation prefix and finalizer, so we never collide with another kopf operator."""
    settings.persistence.finalizer = keys.FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=keys.KOPF_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=keys.KOPF_PREFIX,
        key="last-handled-configuration",
    )
    settings.posting.reporting_component = "netaware"
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 310
    settings.watching.connect_timeout = 10
    settings.watching.reconnect_backoff = 0.1
