"""``pods/eviction`` (PodDisruptionBudgets as the disruption controller counts them: 429 when the budget is
spent) and ``pods/binding``."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import kmock

from operators.api.selectors import from_label_selector
from operators.emulator.errors import bad_request, not_found, status_error
from operators.emulator.store import ObjectStore

PODS = kmock.resource(group="", version="v1", plural="pods")
SUCCESS = {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success", "code": 201}


def check_eviction(store: ObjectStore, pod: Mapping[str, Any]) -> None:
    """Raise the API server's answer when evicting the running ``pod`` would break its budget."""
    phase = (pod.get("status") or {}).get("phase", "Pending")
    if phase != "Running" or pod["metadata"].get("deletionTimestamp"):
        return  # a pod that is not running (or already going) may always go
    budgets = budgets_for(store, pod)
    if len(budgets) > 1:
        raise status_error(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        )
    for budget in budgets:
        healthy, desired = budget_health(store, budget)
        if healthy - 1 < desired:
            name = budget["metadata"]["name"]
            message = f"The disruption budget {name} needs {desired} healthy pods and has {healthy} currently"
            raise status_error(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                {"causes": [{"reason": "DisruptionBudget", "message": message}]},
            )


def budgets_for(store: ObjectStore, pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    namespace = pod["metadata"].get("namespace")
    labels = pod["metadata"].get("labels") or {}
    budgets = []
    for (resource, ns, _), budget in store.objects.items():
        if resource != "policy/v1/poddisruptionbudgets" or ns != namespace:
            continue
        # policy/v1: an empty selector selects every pod of the namespace, a missing one none.
        if from_label_selector((budget.get("spec") or {}).get("selector")).matches(labels):
            budgets.append(budget)
    return budgets


def budget_health(store: ObjectStore, budget: Mapping[str, Any]) -> tuple[int, int]:
    """(healthy pods, pods that must stay healthy), as the disruption controller computes them."""
    spec = budget.get("spec") or {}
    selector = from_label_selector(spec.get("selector"))
    namespace = budget["metadata"].get("namespace")
    members = [
        pod
        for (resource, ns, _), pod in store.objects.items()
        if resource == "/v1/pods" and ns == namespace and selector.matches(pod["metadata"].get("labels") or {})
    ]
    healthy = sum(
        1
        for pod in members
        if (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")
    )
    # The disruption controller takes the expected count from the owning controller's scale;
    # the emulator has no controllers, so a seeded status.expectedPods stands in for it.
    expected = int((budget.get("status") or {}).get("expectedPods") or len(members))
    if spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected, round_up=True)
    elif spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, round_up=True))
    else:
        desired = expected
    return healthy, desired


async def bind(store: ObjectStore, namespace: str | None, name: str | None, body: Any) -> dict[str, Any]:
    """Set a pending pod's ``spec.nodeName`` from a Binding (409 when it is already bound)."""
    body = body if isinstance(body, dict) else {}
    name = name or (body.get("metadata") or {}).get("name")
    target = (body.get("target") or {}).get("name")
    if not name or not target:
        raise bad_request("a Binding needs metadata.name and target.name")
    key = ("/v1/pods", namespace, name)
    pod = store.objects.get(key)
    if pod is None:
        raise not_found(name, "pods", "")
    if (pod.get("spec") or {}).get("nodeName"):
        raise status_error(409, "Conflict", f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"')
    if (pod.get("spec") or {}).get("schedulingGates"):
        raise status_error(409, "Conflict", f"pod {name} has non-empty .spec.schedulingGates")
    updated = copy.deepcopy(pod)
    updated.setdefault("spec", {})["nodeName"] = target
    updated["metadata"]["resourceVersion"] = store.next_rv()
    store.put(PODS, key, updated, "MODIFIED", "binding")
    await store.notify()
    return dict(SUCCESS)


def _scaled(value: int | str, total: int, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        scaled = total * int(text[:-1])
        return -(-scaled // 100) if round_up else scaled // 100
    return int(text)
