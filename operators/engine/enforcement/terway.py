"""The files of the terway-qos backend (SPEC §4.11): what `netaware agent --backend terway-qos` writes for the
terway-qos eBPF dataplane instead of making tc classes, rendered from the same plan as the tc backend.

* ``global_bps_config``: ``key value`` lines in **bytes/s** (the plan's bits/s ÷ 8, rounded down), the keys
  Koordinator's koordlet writes and terway-qos reads: ``hw_tx_bps_max``/``hw_rx_bps_max`` = the node's total per
  direction (tx = egress, rx = ingress); ``offline_l1_*`` = the guaranteed class L1, ``offline_l2_*`` = BE. L0
  (system) is what terway-qos leaves the rest (total - L1 min - L2 min).
* terway-qos has one class for LSR and LS (priority 1): L1's minimum is the sum of their requests, its maximum
  lsClass's limit (at least that minimum).
* ``pod.json``: a JSON **array** of ``{podName, podNamespace, podUID, prio, ipv4, hostNetwork, qosConfig}`` —
  what terway-qos parses (``[]Pod``); koordlet writes an object keyed by UID, which it cannot. ``prio``: 0
  system, 1 LSR/LS, 2 BE; ``qosConfig`` the pod's own ``kubernetes.io/*-bandwidth`` in bytes/s (0: none).

koordlet's unit defect is not repeated: it takes a percentage of the total in bits/s and writes it as bytes/s
(8 times the asked rate); here every figure is bits/s ÷ 8.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from operators.engine.enforcement.plan import DirectionPlan, NodePlan

GLOBAL_CONFIG = "global_bps_config"
POD_CONFIG = "pod.json"
PRIORITY = {"system": 0, "lsr": 1, "ls": 1, "be": 2}
_LINE_DIRECTION = {"tx": "egress", "rx": "ingress"}


def byte_rate(bits: int) -> int:
    return bits // 8


def global_bps_config(plan: NodePlan) -> str:
    """``global_bps_config`` for ``plan`` (which has both directions)."""
    lines = [f"hw_{line}_bps_max {byte_rate(plan.directions[d].total)}" for line, d in _LINE_DIRECTION.items()]
    for level in ("l1", "l2"):
        for line, direction in _LINE_DIRECTION.items():
            low, high = _level(plan.directions[direction], level)
            lines.append(f"offline_{level}_{line}_bps_min {byte_rate(low)}")
            lines.append(f"offline_{level}_{line}_bps_max {byte_rate(high)}")
    return "\n".join(lines) + "\n"


def _level(plan: DirectionPlan, level: str) -> tuple[int, int]:
    """(min, max) bits/s of terway's L1 (LSR and LS) or L2 (BE)."""
    if level == "l2":
        be = plan.klass("be")
        return be.request, be.ceil
    lsr, ls = plan.klass("lsr"), plan.klass("ls")
    low = lsr.request + ls.request
    return low, max(ls.ceil, low)


def pod_config(plan: NodePlan) -> str:
    """``pod.json`` for ``plan``: one entry per classified pod, in pod key order."""
    egress, ingress = plan.directions["egress"], plan.directions["ingress"]
    limits: Mapping[str, int] = {p.key: p.ceil for p in ingress.pods if p.limited}
    entries = []
    for pod in egress.pods:
        namespace, _, name = pod.key.partition("/")
        entries.append(
            {
                "podName": name,
                "podNamespace": namespace,
                "podUID": pod.uid,
                "prio": PRIORITY[pod.qos_class],
                "ipv4": pod.ip,
                "hostNetwork": False,
                "qosConfig": {
                    "ingressBandwidth": byte_rate(limits.get(pod.key, 0)),
                    "egressBandwidth": byte_rate(pod.ceil if pod.limited else 0),
                },
            }
        )
    return json.dumps(entries, indent=2) + "\n"


def terway_files(plan: NodePlan) -> dict[str, str]:
    """File name -> content; empty when the plan shapes nothing (the files keep the last good state)."""
    if not plan.directions:
        return {}
    return {GLOBAL_CONFIG: global_bps_config(plan), POD_CONFIG: pod_config(plan)}
