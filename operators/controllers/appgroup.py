"""The AppGroup controller (kopf): status from :func:`operators.engine.appgroup.appgroup_status`."""

from __future__ import annotations

import datetime
from typing import Any

import kopf

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.engine.appgroup import appgroup_status
from operators.engine.snapshot import Pod, Snapshot

RESOURCE = (keys.APPGROUP_GROUP, keys.V1ALPHA1, "appgroups")


def register(registry: kopf.OperatorRegistry) -> None:
    """Add the AppGroup handlers to ``registry``."""

    @kopf.index("pods", id="appgroup_pods", labels={keys.APPGROUP_LABEL: kopf.PRESENT}, registry=registry)  # type: ignore[arg-type]
    def appgroup_pods(namespace: str, labels: dict[str, str], body: kopf.Body, **_: Any) -> Any:
        return {(namespace, labels[keys.APPGROUP_LABEL]): dict(body)}

    # kopf injects indexes by name, which its handler protocols cannot express: hence the ignores.
    @kopf.on.resume(*RESOURCE, id="appgroup", registry=registry)
    @kopf.on.create(*RESOURCE, id="appgroup", registry=registry)
    @kopf.on.update(*RESOURCE, id="appgroup", field="spec", registry=registry)  # type: ignore[arg-type]
    def reconcile_appgroup(body: kopf.Body, patch: kopf.Patch, appgroup_pods: kopf.Index[Any, Any], **_: Any) -> None:
        group = AppGroup.model_validate(dict(body))
        pods: list[Pod] = []
        for key, members in appgroup_pods.items():
            if key[1] == group.metadata.name:
                pods.extend(Pod.parse(member) for member in members)
        snapshot = Snapshot(pods=tuple(pods))
        status = appgroup_status(group, snapshot, datetime.datetime.now(datetime.UTC))
        patch.status.update(status.to_wire())
