"""AppGroups' pods sent to netaware's scheduler at admission (--scheduler-name, the AppGroup's
netaware.io/scheduler-name): which pods get spec.schedulerName, which keep theirs and are told so, and the Event
on the AppGroup (once per AppGroup and message)."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch
import pytest

from operators.engine.cluster.snapshot import build_snapshot
from webhooks.server import Admission, NamespaceNotifier, admit
from webhooks.view import ClusterView

OURS = "network-aware-scheduler"


def appgroup(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    workloads = [{"workload": {"kind": "Deployment", "name": s, "selector": s}, "dependencies": []} for s in ("a", "b")]
    return {
        "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
        "kind": "AppGroup",
        "metadata": {"name": "shop", "namespace": "default", "annotations": annotations or {}},
        "spec": {"numMembers": 2, "topologySortingAlgorithm": "KahnSort", "workloads": workloads},
    }


def pod(scheduler: str | None, group: str | None = "shop") -> dict[str, Any]:
    labels = {"appgroup.diktyo.x-k8s.io": group, "appgroup.diktyo.x-k8s.io.workload": "a"} if group else {}
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "labels": labels},
            "spec": spec}  # fmt: skip


def admitted(
    body: dict[str, Any], default: str, annotations: dict[str, str] | None = None, plans_keep_scheduler: bool = False
) -> tuple[str, Admission]:
    """The pod's spec.schedulerName as the API server stores it after the webhook's patch, and the admission."""
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "u", "kind": {"kind": "Pod"}, "namespace": "default", "operation": "CREATE",
                          "object": body}}  # fmt: skip
    cluster = ClusterView.from_snapshot(build_snapshot([appgroup(annotations)]))
    result = admit(review, cluster, scheduler_name=default, plans_keep_scheduler=plans_keep_scheduler)
    response = result.answer["response"]
    assert response["allowed"]
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    return str(jsonpatch.apply_patch(body, patch)["spec"].get("schedulerName", "")), result


@pytest.mark.parametrize("named", [None, "", "default-scheduler"])
def test_a_pod_naming_the_default_scheduler_or_none_is_sent_to_netaware(named: str | None) -> None:
    scheduler, result = admitted(pod(named), OURS)
    assert scheduler == OURS and result.appgroup is None and not result.answer["response"].get("warnings")


def test_a_pod_naming_another_scheduler_keeps_it_and_is_told_why() -> None:
    scheduler, result = admitted(pod("batch-scheduler"), OURS)
    assert scheduler == "batch-scheduler"
    assert result.appgroup == ("default", "shop")
    (warning,) = result.answer["response"]["warnings"]
    assert "spec.schedulerName 'batch-scheduler' kept" in warning and "AppGroup default/shop" in warning
    assert f"scheduler {OURS!r}" in warning


@pytest.mark.parametrize(
    ("default", "annotations", "expected"),
    [
        ("", {}, "default-scheduler"),  # the rule is off: nothing changes
        ("", {"netaware.io/scheduler-name": "team-scheduler"}, "team-scheduler"),  # the AppGroup asks for one
        (OURS, {"netaware.io/scheduler-name": ""}, "default-scheduler"),  # the AppGroup opts out
        (OURS, {"netaware.io/scheduler-name": " team-scheduler "}, "team-scheduler"),  # its own, trimmed
    ],
)
def test_the_appgroup_annotation_overrides_the_flag(default: str, annotations: dict[str, str], expected: str) -> None:
    assert admitted(pod("default-scheduler"), default, annotations)[0] == expected


def test_pods_outside_appgroups_and_of_unknown_appgroups_are_left_alone() -> None:
    assert admitted(pod("default-scheduler", group=None), OURS)[0] == "default-scheduler"
    assert admitted(pod("default-scheduler", group="other"), OURS)[0] == "default-scheduler"


def test_the_event_names_the_appgroup_once_per_message() -> None:
    posted: list[tuple[dict[str, str], str, str]] = []
    notifier = NamespaceNotifier()
    notifier._post = lambda involved, reason, message: posted.append((involved, reason, message))  # type: ignore[method-assign]
    for _ in range(3):
        notifier.appgroup_problem("default", "shop", "kept")
    notifier.appgroup_problem("default", "shop", "kept another")
    assert [(i["kind"], i["namespace"], i["name"], r, m) for i, r, m in posted] == [
        ("AppGroup", "default", "shop", "SchedulerNotNetaware", "kept"),
        ("AppGroup", "default", "shop", "SchedulerNotNetaware", "kept another"),
    ]


PLANNED = {"netaware.io/ordered-scheduling": "plan"}


@pytest.mark.parametrize(
    ("annotations", "keep", "expected"),
    [
        # --plan-pods-keep-scheduler: a pod of an AppGroup released by plan is bound by the scheduler it names
        (PLANNED, True, ""),  # (no patch: the pod keeps naming none, the API server's default-scheduler)
        ({"netaware.io/ordered-scheduling": " Plan "}, True, ""),  # read as the controller reads it
        (PLANNED, False, OURS),  # without the flag: netaware's scheduler, as before
        ({"netaware.io/ordered-scheduling": "true"}, True, OURS),  # dependencies first: netaware's scores needed
        ({"netaware.io/ordered-scheduling": "plan-ungated"}, True, OURS),  # the extender plans these
        ({**PLANNED, "netaware.io/scheduler-name": "team-scheduler"}, True, "team-scheduler"),  # the AppGroup's own
        ({**PLANNED, "netaware.io/scheduler-name": OURS}, True, OURS),  # ... also when it names netaware's
    ],
)
def test_the_pods_of_a_plan_keep_their_scheduler_with_the_flag(
    annotations: dict[str, str], keep: bool, expected: str
) -> None:
    scheduler, result = admitted(pod(None), OURS, annotations, plans_keep_scheduler=keep)
    assert scheduler == expected
    assert result.appgroup is None and not result.answer["response"].get("warnings")
