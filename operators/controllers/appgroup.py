"""The AppGroup controller (kopf): a thin shell over :func:`operators.engine.status.appgroup.appgroup_status`.

* Every AppGroup event (level-triggered, no kopf diff-base): the status is computed and written
  through the status subresource when it changed (the order is recomputed only when
  ``metadata.generation`` moved past ``status.observedGeneration``); an invalid spec posts a Warning
  Event (once per new problem). kopf's ``last-handled-configuration`` annotation would hold a
  second copy of the spec and take a large AppGroup past etcd's object limit, so none is written.
* Pod events of labelled pods: the pods are kept in an index keyed by (namespace, AppGroup),
  never listed per event; the AppGroups that cover the pod are recomputed and their status is
  patched only when it changed.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import kopf
import pydantic
from kubernetes_asyncio.client.exceptions import ApiException

from operators.api import errors, keys
from operators.api.appgroup import AppGroup, AppGroupStatus
from operators.controllers.metrics import reconciler
from operators.engine.cluster.appgroups import workload_namespaces
from operators.engine.cluster.conditions import condition
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.status.appgroup import appgroup_status
from operators.kube import patch_status

RESOURCE = (keys.APPGROUP_GROUP, keys.V1ALPHA1, "appgroups")
INVALID_SPEC = "InvalidSpec"


def _compact_pod(body: Mapping[str, Any]) -> dict[str, Any]:
    """What the status needs of a pod (kept small: the index holds every labelled pod)."""
    meta = body.get("metadata", {})
    return {
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "labels": dict(meta.get("labels", {})),
        },
        "spec": {"nodeName": body.get("spec", {}).get("nodeName")},
        "status": {"phase": body.get("status", {}).get("phase")},
    }


def _compact_node(body: Mapping[str, Any]) -> dict[str, Any]:
    labels = body.get("metadata", {}).get("labels", {})
    return {
        "metadata": {
            "name": body["metadata"]["name"],
            "labels": {key: labels[key] for key in (keys.REGION_LABEL, keys.ZONE_LABEL) if key in labels},
        }
    }


def compute_status(
    body: Mapping[str, Any],
    pods: Mapping[Any, Iterable[Any]],
    nodes: Mapping[Any, Iterable[Any]],
    now: datetime.datetime,
) -> AppGroupStatus:
    """The status of one AppGroup from the controller's indexes (a spec that does not parse is a condition)."""
    try:
        group = AppGroup.model_validate(dict(body))
    except pydantic.ValidationError as error:
        message = errors.render_all(errors.from_pydantic(error))
        previous = body.get("status") or {}
        status = AppGroupStatus.model_validate(previous) if previous else AppGroupStatus()
        ready = condition(
            status.conditions,
            keys.CONDITION_READY,
            False,
            INVALID_SPEC,
            message,
            now,
            body.get("metadata", {}).get("generation"),
        )
        return status.model_copy(update={"conditions": [ready]})
    members = [
        Pod.parse(pod)
        for namespace in workload_namespaces(group)
        for pod in pods.get((namespace, group.metadata.name), ())
    ]
    node_names = {pod.node_name for pod in members if pod.node_name}
    known_nodes = [Node.parse(node) for name in sorted(node_names) for node in nodes.get(name, ())]
    snapshot = Snapshot(pods=tuple(members), nodes=tuple(known_nodes))
    return appgroup_status(group, snapshot, now)


def _ready(status: Mapping[str, Any] | None) -> Mapping[str, Any]:
    for item in (status or {}).get("conditions") or ():
        if item.get("type") == keys.CONDITION_READY:
            return dict(item)
    return {}


@reconciler("appgroup")
async def sync_status(
    key: tuple[str, str],
    body: Mapping[str, Any],
    memo: kopf.Memo,
    pods: Mapping[Any, Iterable[Any]],
    nodes: Mapping[Any, Iterable[Any]],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Compute and write one AppGroup's status; return (previous, new).

    Writes for one AppGroup are serialised and computed inside the lock from the live indexes,
    so a slow, older computation can never overwrite a newer one. The last status written is
    remembered, because the watched body may lag behind our own writes.
    """
    lock = memo.appgroup_locks.setdefault(key, asyncio.Lock())
    async with lock:
        previous = memo.appgroup_status.get(key, dict(body.get("status") or {}))
        now = datetime.datetime.now(datetime.UTC)
        status = compute_status({**body, "status": previous}, pods, nodes, now).to_wire()
        if status != previous:
            try:
                await patch_status(memo.api, *RESOURCE, key[0], key[1], status)
            except ApiException as error:
                raise kopf.TemporaryError(
                    f"writing the status failed: {error.status} {error.reason}", delay=2
                ) from None
            memo.appgroup_status[key] = status
        return previous, status


def register(registry: kopf.OperatorRegistry) -> None:
    """Add the AppGroup handlers to ``registry``."""

    @kopf.on.startup(id="appgroup_state", registry=registry)
    def init_state(memo: kopf.Memo, **_: Any) -> None:
        memo.appgroup_locks = {}
        memo.appgroup_status = {}

    @kopf.index("pods", id="appgroup_pods", labels={keys.APPGROUP_LABEL: kopf.PRESENT}, registry=registry)  # type: ignore[arg-type]
    def appgroup_pods(namespace: str, labels: Mapping[str, str], body: kopf.Body, **_: Any) -> Any:
        return {(namespace, labels[keys.APPGROUP_LABEL]): _compact_pod(body)}

    @kopf.index("nodes", id="appgroup_nodes", registry=registry)
    def appgroup_nodes(name: str, body: kopf.Body, **_: Any) -> Any:
        return {name: _compact_node(body)}

    @kopf.index(*RESOURCE, id="appgroups_by_name", registry=registry)
    def appgroups_by_name(name: str, body: kopf.Body, **_: Any) -> Any:
        return {name: dict(body)}

    # kopf injects indexes by name, which its handler protocols cannot express.
    @kopf.on.event(*RESOURCE, id="appgroup", registry=registry)  # type: ignore[arg-type]
    async def reconcile_appgroup(
        type: str | None,
        body: kopf.Body,
        namespace: str,
        name: str,
        memo: kopf.Memo,
        appgroup_pods: kopf.Index[Any, Any],
        appgroup_nodes: kopf.Index[Any, Any],
        logger: logging.Logger,
        **_: Any,
    ) -> None:
        if type == "DELETED":
            memo.appgroup_status.pop((namespace, name), None)
            memo.appgroup_locks.pop((namespace, name), None)
            return
        if (body.get("metadata") or {}).get("deletionTimestamp"):
            return
        previous, status = await sync_status((namespace, name), body, memo, appgroup_pods, appgroup_nodes)
        old, new = _ready(previous), _ready(status)
        if new.get("status") == "False" and (old.get("reason"), old.get("message")) != (new["reason"], new["message"]):
            kopf.warn(body, reason=new["reason"], message=new["message"])
            logger.warning("AppGroup spec is not valid: %s: %s", new["reason"], new["message"])
        elif new.get("status") == "True" and old.get("status") == "False":
            kopf.info(body, reason=new["reason"], message=new["message"])

    @kopf.on.event(  # type: ignore[arg-type]
        "pods",
        id="appgroup_pod_changed",
        labels={keys.APPGROUP_LABEL: kopf.PRESENT},
        registry=registry,
    )
    async def pod_changed(
        namespace: str,
        labels: Mapping[str, str],
        memo: kopf.Memo,
        appgroup_pods: kopf.Index[Any, Any],
        appgroup_nodes: kopf.Index[Any, Any],
        appgroups_by_name: kopf.Index[Any, Any],
        **_: Any,
    ) -> None:
        for body in list(appgroups_by_name.get(labels[keys.APPGROUP_LABEL], ())):
            try:
                covered = workload_namespaces(AppGroup.model_validate(body))
            except pydantic.ValidationError:
                continue  # the AppGroup handler reports an unreadable spec
            if namespace in covered:
                key = (body["metadata"].get("namespace"), body["metadata"]["name"])
                await sync_status(key, body, memo, appgroup_pods, appgroup_nodes)
