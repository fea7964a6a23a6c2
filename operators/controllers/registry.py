"""One kopf registry with every controller, and the settings they share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kopf

from operators.api import keys
from operators.api.config.controllers import ControllerOptions
from operators.controllers import appgroup, networktopology, nodebandwidth, nodeslo
from operators.kube import ApiClientFactory, cluster_api_client
from operators.sources.cache import ClusterCache
from operators.sources.kinds import (
    APPGROUP_PODS,
    APPGROUP_SPECS,
    FILTER_KINDS,
    NETWORKTOPOLOGIES,
    NODES,
    NODESLOS,
    PODS,
    Kind,
)
from operators.supervision import Supervisor

Register = Callable[[kopf.OperatorRegistry, ClusterCache, ControllerOptions, Supervisor], None]
COMPONENTS: dict[str, Register] = {
    "appgroup": lambda registry, cache, options, tasks: appgroup.register(registry, cache, options.appgroup, tasks),
    "networktopology": lambda registry, cache, options, tasks: networktopology.register(
        registry, cache, options.networktopology, tasks
    ),
    "nodeslo": lambda registry, cache, options, tasks: nodeslo.register(registry, cache, options.nodeslo, tasks),
    "nodebandwidth": lambda registry, cache, options, tasks: nodebandwidth.register(
        registry, cache, options.nodebandwidth, tasks
    ),
}

# What each controller reads from the process's cluster cache (AppGroup pods only: the label selects them).
CACHED_KINDS: dict[str, tuple[Kind, ...]] = {
    "appgroup": (APPGROUP_PODS, NODES, APPGROUP_SPECS),  # specs: the release rule of the topology-order gates
    "networktopology": (APPGROUP_PODS, NODES, APPGROUP_SPECS),
    "nodeslo": (NODES, NODESLOS),
    "nodebandwidth": (NODES, NODESLOS, PODS),  # every bound pod: the unaccounted ones lower what a node advertises
}
# the AppGroup controller's plans: what every node holds, the costs, and what kube-scheduler's filters read (the
# namespaces' labels for affinity, the storage for the volume filters, what selects a pod for default spreading)
PLAN_KINDS = (PODS, NETWORKTOPOLOGIES, *FILTER_KINDS)


def build_registry(
    cache: ClusterCache,
    components: tuple[str, ...] = tuple(COMPONENTS),
    api_client_factory: ApiClientFactory = cluster_api_client,
    options: ControllerOptions | None = None,
    supervisor: Supervisor | None = None,
) -> kopf.OperatorRegistry:
    """A registry with the chosen controllers, reading ``cache``, their long-running tasks under ``supervisor``, and
    the kubernetes-asyncio client they share (``memo.api``, opened before any controller starts)."""
    tasks = supervisor or Supervisor()
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(id="api_client", registry=registry)
    async def open_api_client(memo: kopf.Memo, **_: Any) -> None:
        memo.api = await api_client_factory()

    for name in components:
        COMPONENTS[name](registry, cache, options or ControllerOptions(), tasks)

    @kopf.on.cleanup(id="api_client", registry=registry)
    async def close_api_client(memo: kopf.Memo, **_: Any) -> None:
        api = getattr(memo, "api", None)
        if api is not None:
            await api.close()  # after the controllers' own cleanups

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
