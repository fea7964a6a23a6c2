"""Objects the tests and the benchmarks create on the control plane, written once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def member_deployment(
    namespace: str,
    group: str,
    selector: str,
    replicas: int,
    cpu: str | None = None,
    scheduler: str | None = None,
    gates: Sequence[str] = (),
) -> dict[str, Any]:
    """A Deployment of pause pods labelled as AppGroup ``group``'s workload ``selector``: each asking ``cpu`` (when
    given), for ``scheduler`` (when given), created behind the scheduling ``gates``."""
    labels = {"appgroup.diktyo.x-k8s.io": group, "appgroup.diktyo.x-k8s.io.workload": selector}
    container: dict[str, Any] = {"name": "app", "image": PAUSE_IMAGE}
    if cpu is not None:
        container["resources"] = {"requests": {"cpu": cpu}}
    spec: dict[str, Any] = {"containers": [container]}
    if scheduler is not None:
        spec = {"schedulerName": scheduler, **spec}
    if gates:
        spec["schedulingGates"] = [{"name": gate} for gate in gates]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": selector, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }
