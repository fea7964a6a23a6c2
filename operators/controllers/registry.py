"""One kopf registry with every controller, and the settings they share."""

from __future__ import annotations

import kopf

from operators.api import keys
from operators.controllers import appgroup

COMPONENTS = {"appgroup": appgroup.register}


def build_registry(components: tuple[str, ...] = tuple(COMPONENTS)) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    for name in components:
        COMPONENTS[name](registry)
    return registry


def configure(settings: kopf.OperatorSettings) -> None:
    """Our own annotation prefix and finalizer, so we never collide with another kopf operator."""
    settings.persistence.finalizer = keys.FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=keys.KOPF_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=keys.KOPF_PREFIX,
        key="last-handled-configuration",
    )
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 310
    settings.watching.connect_timeout = 10
    settings.watching.reconnect_backoff = 0.1
