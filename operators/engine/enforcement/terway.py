"""The files of the terway-qos backend: what `netaware agent --backend terway-qos` writes for the terway-qos eBPF
dataplane instead of making tc classes, rendered from the same plan as the tc backend, in the shapes released
terway-qos reads (v0.3.2, the last release, and its main branch since: ``pkg/config/syncer.go``,
``pkg/config/config.go``, ``pkg/config/types.go``, ``pkg/types/config.go``).

1. ``global_bps_config``: ``key value`` lines in **bytes/s** (the plan's bits/s ÷ 8, rounded down):
   ``hw_tx_bps_max``/``hw_rx_bps_max`` = the node's total per direction (tx = egress, rx = ingress);
   ``offline_l1_*`` = L1, LSR and LS together (min: the sum of their requests; max: lsClass's limit, at least
   that min); ``offline_l2_*`` = L2, BE (beClass's request and limit). L0 (system) is left out: terway-qos gives
   it ``hw - L1 min - L2 min``. Only the NodeSLO sets the levels: terway-qos has no per-pod minimum, so the pods'
   ``kubernetes.io/*-request`` (which raise the tc classes' rates and ceils) never raise a level above its class's
   limit.
2. terway-qos refuses the whole file (``GlobalConfig.Validate``) when a level's max exceeds the hardware max, a
   level's min exceeds its max, or **L1's max plus L2's max exceeds the hardware max**. A NodeSLO that gives
   such numbers (the defaults do: every limit 100 %) cannot be expressed for terway-qos: nothing is written for
   it (the last good files stay) and the reason is a problem of the pass (an Event).
3. ``pod.json``: a JSON **object keyed by pod UID**, each ``{podName, podNamespace, podUID, prio, cgroupDir,
   qosConfig: {ingressBandwidth, egressBandwidth}}`` (``map[string]*config.Pod``; an array is refused).
   terway-qos finds a pod by its cgroup directory (it reads ``net_cls.classid`` there), so ``cgroupDir`` is the
   pod's net_cls cgroup on the host, as the kubelet lays it out (:func:`pod_cgroup_dir`). ``prio``: 0 system,
   1 LSR/LS, 2 BE; ``qosConfig``: the pod's own ``kubernetes.io/*-bandwidth`` in bytes/s (0: none).

koordlet's unit defect is not repeated: it takes a percentage of the total in bits/s and writes it as bytes/s
(8 times the asked rate); here every figure is bits/s ÷ 8.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from operators.engine.enforcement.plan import DirectionPlan, NodePlan, PodTraffic

GLOBAL_CONFIG = "global_bps_config"
POD_CONFIG = "pod.json"
PRIORITY = {"system": 0, "lsr": 1, "ls": 1, "be": 2}
_LINE_DIRECTION = {"tx": "egress", "rx": "ingress"}
CGROUP_DRIVERS = ("systemd", "cgroupfs")
NET_CLS_ROOT = "/sys/fs/cgroup/net_cls"


@dataclass(frozen=True)
class CgroupLayout:
    """How the kubelet names pod cgroups (its ``cgroupDriver``) and where the net_cls hierarchy is mounted."""

    driver: str = "systemd"
    root: str = NET_CLS_ROOT


def byte_rate(bits: int) -> int:
    return bits // 8


@dataclass(frozen=True)
class Level:
    """One terway-qos level of one direction, bytes/s."""

    min: int
    max: int


def levels(plan: DirectionPlan) -> dict[str, Level]:
    """terway-qos's levels of one direction (rule 1): ``hw`` (min = max = the total), ``l1``, ``l2``; the maxima
    are the classes' limits as the NodeSLO gives them (``plan.limits``), not the ceils the pods' requests raised."""
    lsr, ls, be = plan.klass("lsr"), plan.klass("ls"), plan.klass("be")
    l1_min = lsr.request + ls.request
    total = byte_rate(plan.total)
    return {
        "hw": Level(total, total),
        "l1": Level(byte_rate(l1_min), byte_rate(max(plan.limits["ls"], l1_min))),
        "l2": Level(byte_rate(be.request), byte_rate(plan.limits["be"])),
    }


def _maxima(plan: DirectionPlan, direction: str) -> dict[str, str]:
    """What each level's max is made of, as the NodeSLO names it (for the problems)."""
    l1_min = plan.klass("lsr").request + plan.klass("ls").request
    l1 = f"lsClass {direction}Limit" if plan.limits["ls"] >= l1_min else f"lsrClass and lsClass {direction}Requests"
    return {"L1": l1, "L2": f"beClass {direction}Limit"}


def refusals(plan: NodePlan) -> list[str]:
    """Why terway-qos would refuse the ``global_bps_config`` of ``plan`` (rule 2; empty: it accepts it)."""
    found = []
    for line, direction in _LINE_DIRECTION.items():
        level = levels(plan.directions[direction])
        made_of = _maxima(plan.directions[direction], direction)
        hw, l1, l2 = level["hw"].max, level["l1"], level["l2"]
        why = []
        for name, value in (("L1", l1), ("L2", l2)):
            if value.max > hw:
                why.append(f"{name}'s max ({made_of[name]}, {value.max} B/s) is above the node's {hw} B/s")
            if value.min > value.max:
                why.append(f"{name}'s min {value.min} B/s is above its max {value.max} B/s")
        if l1.max + l2.max > hw:
            why.append(
                f"L1's max ({made_of['L1']}, {l1.max} B/s) plus L2's max ({made_of['L2']}, {l2.max} B/s) is above "
                f"the node's {hw} B/s"
            )
        found += [f"terway-qos would refuse global_bps_config ({line}): {reason}" for reason in why]
    return found


def global_bps_config(plan: NodePlan) -> str:
    """``global_bps_config`` for ``plan`` (which has both directions)."""
    lines = [f"hw_{line}_bps_max {levels(plan.directions[d])['hw'].max}" for line, d in _LINE_DIRECTION.items()]
    for level in ("l1", "l2"):
        for line, direction in _LINE_DIRECTION.items():
            found = levels(plan.directions[direction])[level]
            lines.append(f"offline_{level}_{line}_bps_min {found.min}")
            lines.append(f"offline_{level}_{line}_bps_max {found.max}")
    return "\n".join(lines) + "\n"


def pod_cgroup_dir(uid: str, kubernetes_qos: str, layout: CgroupLayout) -> str:
    """The pod's net_cls cgroup directory as the kubelet makes it: Guaranteed pods directly under ``kubepods``,
    the others under their QoS class's cgroup; the systemd driver writes the UID with ``_`` for ``-``."""
    if layout.driver == "systemd":
        slice_uid = uid.replace("-", "_")
        if kubernetes_qos == "Guaranteed":
            return f"{layout.root}/kubepods.slice/kubepods-pod{slice_uid}.slice"
        qos = kubernetes_qos.lower()
        return f"{layout.root}/kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{slice_uid}.slice"
    if kubernetes_qos == "Guaranteed":
        return f"{layout.root}/kubepods/pod{uid}"
    return f"{layout.root}/kubepods/{kubernetes_qos.lower()}/pod{uid}"


def pod_config(plan: NodePlan, layout: CgroupLayout) -> tuple[str, list[str]]:
    """``pod.json`` for ``plan`` (rule 3), one entry per classified pod, in pod key order; and the pods left out
    (no UID: terway-qos could not find them)."""
    egress, ingress = plan.directions["egress"], plan.directions["ingress"]
    limits: Mapping[str, int] = {p.key: p.ceil for p in ingress.pods if p.limited}
    entries: dict[str, dict[str, object]] = {}
    problems = []
    for pod in egress.pods:
        if not pod.uid:
            problems.append(f"pod {pod.key} has no metadata.uid: not in terway-qos's pod.json")
            continue
        entries[pod.uid] = _entry(pod, limits.get(pod.key, 0), layout)
    return json.dumps(entries, indent=2) + "\n", problems


def _entry(pod: PodTraffic, ingress_limit: int, layout: CgroupLayout) -> dict[str, object]:
    namespace, _, name = pod.key.partition("/")
    return {
        "podName": name,
        "podNamespace": namespace,
        "podUID": pod.uid,
        "prio": PRIORITY[pod.qos_class],
        "cgroupDir": pod_cgroup_dir(pod.uid, pod.kubernetes_qos, layout),
        "qosConfig": {
            "ingressBandwidth": byte_rate(ingress_limit),
            "egressBandwidth": byte_rate(pod.ceil if pod.limited else 0),
        },
    }


def terway_files(plan: NodePlan, layout: CgroupLayout) -> tuple[dict[str, str], list[str]]:
    """File name -> content, and the problems: no files when the plan shapes nothing or terway-qos would refuse
    its global configuration (the files keep the last good state)."""
    if not plan.directions:
        return {}, []
    refused = refusals(plan)
    if refused:
        return {}, [f"NodeSLO {plan.node} cannot be expressed for terway-qos, nothing written: {r}" for r in refused]
    pods, problems = pod_config(plan, layout)
    return {GLOBAL_CONFIG: global_bps_config(plan), POD_CONFIG: pods}, problems
