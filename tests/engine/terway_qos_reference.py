"""What released terway-qos does with the two files netaware writes, reproduced rule by rule from its Go sources
(github.com/AliyunContainerService/terway-qos, v0.3.2 = commit fc1728b, unchanged on main up to a625936); each
rule names the upstream file. Used by the terway-qos backend's tests as the reader of its files: as strict as the
Go code (it refuses what terway-qos refuses), never more lenient."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

UINT64 = 2**64


class Refused(ValueError):
    """terway-qos returns an error for the whole file (it logs it and changes nothing)."""


def parse_config(key: str, content: str) -> int:
    """pkg/config/config.go ``parseConfig``: the first match of ``<key>(?:=?|\\s+)(\\d+)`` anywhere in the file,
    ``strconv.ParseUint(..., 10, 64)`` with its error ignored (0)."""
    found = re.search(rf"{key}(?:=?|\s+)(\d+)", content)
    if found is None:
        return 0
    value = int(found.group(1))
    return value if value < UINT64 else 0


@dataclass
class GlobalConfig:
    """pkg/types/config.go ``GlobalConfig`` (uint64 fields)."""

    hw_guaranteed: int = 0
    hw_burstable: int = 0
    l0_max: int = 0
    l0_min: int = 0
    l1_max: int = 0
    l1_min: int = 0
    l2_max: int = 0
    l2_min: int = 0

    def default(self) -> None:
        """pkg/types/config.go ``Default``: burstable = guaranteed, L0 max = hw, L0 min = hw - L1 min - L2 min
        (uint64: wraps around below 0)."""
        if self.hw_guaranteed != 0 and self.hw_burstable == 0:
            self.hw_burstable = self.hw_guaranteed
        if self.l0_max == 0:
            self.l0_max = self.hw_guaranteed
        if self.l0_min == 0:
            self.l0_min = (self.hw_guaranteed - self.l1_min - self.l2_min) % UINT64

    def validate(self) -> bool:
        """pkg/types/config.go ``Validate``."""
        levels = (self.hw_burstable, self.l0_max, self.l0_min, self.l1_max, self.l1_min, self.l2_max, self.l2_min)
        if not any(levels):
            return True
        return not (
            self.hw_guaranteed > self.hw_burstable
            or self.hw_guaranteed < self.l1_max
            or self.hw_guaranteed < self.l2_max
            or self.l1_min > self.l1_max
            or self.l2_min > self.l2_max
            or self.hw_guaranteed < self.l2_max + self.l1_max
        )


def read_global_config(content: str) -> dict[str, GlobalConfig]:
    """pkg/config/config.go ``GetGlobalConfig`` then pkg/bpf/maps.go ``WriteGlobalConfig`` (Default, Validate per
    direction, an error for the whole file when one is invalid): direction -> the levels terway-qos enforces."""
    found = {}
    for direction, line in (("ingress", "rx"), ("egress", "tx")):
        config = GlobalConfig(
            hw_guaranteed=parse_config(f"hw_{line}_bps_max", content),
            l0_min=parse_config(f"online_{line}_bps_min", content),
            l0_max=parse_config(f"online_{line}_bps_max", content),
            l1_min=parse_config(f"offline_l1_{line}_bps_min", content),
            l1_max=parse_config(f"offline_l1_{line}_bps_max", content),
            l2_min=parse_config(f"offline_l2_{line}_bps_min", content),
            l2_max=parse_config(f"offline_l2_{line}_bps_max", content),
        )
        config.default()
        if not config.validate():
            raise Refused(f"{direction} config is not valid, {config}")
        found[direction] = config
    return found


@dataclass
class PodEntry:
    """pkg/config/types.go ``Pod`` with ``QoSConfig``."""

    pod_name: str = ""
    pod_namespace: str = ""
    pod_uid: str = ""
    prio: int = 0
    cgroup_dir: str = ""
    qos: dict[str, int] = field(default_factory=lambda: {"ingressBandwidth": 0, "egressBandwidth": 0})


_POD_FIELDS = {"podname": "pod_name", "podnamespace": "pod_namespace", "poduid": "pod_uid", "cgroupdir": "cgroup_dir"}


def _uint64(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < UINT64:
        raise Refused(f"json: cannot unmarshal {value!r} into Go struct field {where} of type uint64")
    return value


def _pod(value: Any, key: str) -> PodEntry:
    if value is None:
        # configs[key] is a nil *Pod; parsePodConfig then dereferences it: terway-qos panics.
        raise Refused(f"pod.json[{key!r}] is null: terway-qos dereferences a nil *Pod and panics")
    if not isinstance(value, dict):
        raise Refused(f"json: cannot unmarshal {type(value).__name__} into Go value of type config.Pod")
    entry = PodEntry()
    for name, item in value.items():  # encoding/json: keys match the tags case-insensitively; others are ignored
        folded = name.casefold()
        if folded in _POD_FIELDS:
            if not isinstance(item, str):
                raise Refused(f"json: cannot unmarshal {item!r} into Go struct field Pod.{name} of type string")
            setattr(entry, _POD_FIELDS[folded], item)
        elif folded == "prio":
            if isinstance(item, bool) or not isinstance(item, int) or not -(2**63) <= item < 2**63:
                raise Refused(f"json: cannot unmarshal {item!r} into Go struct field Pod.prio of type int")
            entry.prio = item
        elif folded == "qosconfig":
            if not isinstance(item, dict):
                raise Refused(f"json: cannot unmarshal {item!r} into Go struct field Pod.qosConfig")
            for qos_name, amount in item.items():
                for known in ("ingressBandwidth", "egressBandwidth"):
                    if qos_name.casefold() == known.casefold():
                        entry.qos[known] = _uint64(amount, f"Pod.qosConfig.{known}")
    return entry


def read_pod_config(content: str) -> dict[str, PodEntry]:
    """pkg/config/syncer.go ``parsePodConfig``: ``json.Unmarshal`` into ``map[string]*Pod``: an object keyed by
    anything (terway-qos uses only the values); an array is refused ("cannot unmarshal array into Go value of type
    map[string]*config.Pod")."""
    document = json.loads(content)
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise Refused(f"json: cannot unmarshal {type(document).__name__} into Go value of type map[string]*config.Pod")
    return {key: _pod(value, key) for key, value in document.items()}


def applied_priority(entry: PodEntry) -> int | None:
    """pkg/config/syncer.go ``podChanged``: a prio in 0..2 is applied; any other keeps the pod's class."""
    return entry.prio if 0 <= entry.prio <= 2 else None
