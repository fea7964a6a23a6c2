"""The agent's traffic control (pyroute2): the HTB root and classes on a device, the interface's ingress redirect to
the ifb, and the ifb's per-pod u32 filters (handle ``800::<leaf minor>``)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable
from typing import Any

from operators.agent.links import (
    ETH_P_ALL,
    ETH_P_IP,
    INGRESS_HANDLE,
    MEMBER_PREF,
    REDIRECT_PREF,
    ROOT_HANDLE,
    KernelError,
    Netlink,
)
from operators.engine.enforcement.changes import (
    MAJOR,
    QUANTUM,
    Change,
    DeleteClass,
    DeleteMember,
    HtbClass,
    MoveMember,
    SetClass,
    SetMember,
)
from operators.engine.enforcement.plan import HOST_LEAF


class TrafficControl(Netlink):
    """The HTB trees (egress on the interface, ingress on the ifb), the ingress redirect and the per-pod u32
    filters."""

    def ensure_root(self, device: str) -> int:
        """The agent's HTB root on ``device``, created over the kernel's default qdisc; a root qdisc of anyone
        else is left alone (``KernelError``)."""
        index = self._index(device)
        root = self._root(index)
        if root is None:
            self._call("tc", "add", "htb", index=index, handle=ROOT_HANDLE, default=HOST_LEAF)
        elif root != ("htb", ROOT_HANDLE):
            kind, handle = root
            raise KernelError(f"device {device!r} has a root qdisc {kind} {handle >> 16:x}: the agent did not create")
        return index

    def _root(self, index: int) -> tuple[str, int] | None:
        """The root qdisc as (kind, handle); None when it is the kernel's default (handle 0)."""
        for qdisc in self._ipr.get_qdiscs(index=index):
            if qdisc["parent"] == 0xFFFFFFFF and qdisc["handle"] != 0:
                return str(qdisc.get_attr("TCA_KIND")), int(qdisc["handle"])
        return None

    def read_classes(self, index: int) -> tuple[dict[int, HtbClass], dict[int, int]]:
        """The agent's classes on a device and their byte counters."""
        classes, counted = {}, {}
        for message in self._ipr.get_classes(index=index):
            handle = int(message["handle"])
            if handle >> 16 != MAJOR or message.get_attr("TCA_KIND") != "htb":
                continue
            options = message.get_attr("TCA_OPTIONS")
            parms = options.get_attr("TCA_HTB_PARMS") if options is not None else None
            if parms is None:
                continue
            rate = options.get_attr("TCA_HTB_RATE64") or parms["rate"]
            ceil = options.get_attr("TCA_HTB_CEIL64") or parms["ceil"]
            parent = int(message["parent"])
            minor = handle & 0xFFFF
            top = parent in (ROOT_HANDLE, 0xFFFFFFFF)  # a class right under the qdisc reads back as TC_H_ROOT
            classes[minor] = HtbClass(minor, 0 if top else parent & 0xFFFF, rate, ceil, parms["prio"])
            stats = message.get_attr("TCA_STATS2")
            basic = stats.get_attr("TCA_STATS_BASIC") if stats is not None else None
            counted[minor] = int(basic["bytes"]) if basic else 0
        return classes, counted

    def apply_classes(self, index: int, changes: Iterable[Change]) -> None:
        for change in changes:
            if isinstance(change, DeleteClass):
                self._call("tc", "del-class", index=index, handle=ROOT_HANDLE | change.minor)  # no kind: no rate tables
            elif isinstance(change, SetClass):
                klass = change.klass
                self._call(
                    "tc",
                    "add-class" if change.new else "change-class",
                    "htb",
                    index=index,
                    handle=ROOT_HANDLE | klass.minor,
                    parent=ROOT_HANDLE | klass.parent,
                    rate=klass.rate,
                    ceil=klass.ceil,
                    prio=klass.prio,
                    quantum=QUANTUM,
                )

    def ensure_redirect(self, ifb_index: int) -> None:
        """The interface's ingress redirected to the ifb. An ingress qdisc the agent did not make (no redirect
        filter of its in it) is foreign: ``KernelError``."""
        index = self._index(self.interface)
        kinds = {int(q["handle"]): q.get_attr("TCA_KIND") for q in self._ipr.get_qdiscs(index=index)}
        if INGRESS_HANDLE not in kinds:
            self._call("tc", "add", "ingress", index=index, handle=INGRESS_HANDLE)
        elif kinds[INGRESS_HANDLE] != "ingress" or not self._redirects(index):
            raise KernelError(
                f"device {self.interface!r} has an ingress qdisc ({kinds[INGRESS_HANDLE]}) the agent did not create"
            )
        if not self._redirects(index):
            self._call(
                "tc",
                "add-filter",
                "u32",
                index=index,
                parent=INGRESS_HANDLE,
                prio=REDIRECT_PREF,
                protocol=ETH_P_ALL,
                target=0,
                keys=["0x0/0x0+0"],
                action={"kind": "mirred", "direction": "egress", "action": "redirect", "ifindex": ifb_index},
            )

    def _redirects(self, index: int) -> bool:
        return any(f["info"] >> 16 == REDIRECT_PREF for f in self._ipr.get_filters(index=index, parent=INGRESS_HANDLE))

    def read_filters(self, index: int) -> dict[str, int]:
        """Destination address -> leaf minor of the ifb's per-pod filters."""
        members = {}
        for message in self._ipr.get_filters(index=index, parent=ROOT_HANDLE):
            options = message.get_attr("TCA_OPTIONS")
            selector = options.get_attr("TCA_U32_SEL") if options is not None else None
            classid = options.get_attr("TCA_U32_CLASSID") if options is not None else None
            address = _u32_destination(selector) if selector is not None else None
            if address is not None and classid is not None:
                members[address] = int(classid) & 0xFFFF
        return members

    def apply_filters(self, index: int, changes: Iterable[Change]) -> None:
        for change in changes:
            if isinstance(change, DeleteMember):
                self._delete_filter(index, change.minor)
            elif isinstance(change, SetMember):
                self._add_filter(index, change.ip, change.minor)
            elif isinstance(change, MoveMember):  # the new filter first: the address always has a leaf
                self._add_filter(index, change.ip, change.new)
                self._delete_filter(index, change.old)

    def _delete_filter(self, index: int, minor: int) -> None:
        self._call(
            "tc",
            "del-filter",
            kind="u32",
            index=index,
            parent=ROOT_HANDLE,
            prio=MEMBER_PREF,
            protocol=ETH_P_IP,
            handle=0x80000000 | minor,
            target=0,
            keys=[],
        )

    def _add_filter(self, index: int, ip: str, minor: int) -> None:
        address = struct.unpack(">I", socket.inet_aton(ip))[0]
        self._call(
            "tc",
            "add-filter",
            "u32",
            index=index,
            parent=ROOT_HANDLE,
            prio=MEMBER_PREF,
            protocol=ETH_P_IP,
            handle=0x80000000 | minor,
            target=ROOT_HANDLE | minor,
            keys=[f"0x{address:08x}/0xffffffff+16"],
        )


def _u32_destination(selector: Any) -> str | None:
    """The address a one-key u32 selector matches as ``ip dst`` (offset 16, mask /32), decoded from the raw
    attribute: pyroute2's own decoding of the keys is 4 bytes off."""
    raw = bytes(selector.data[selector.offset + 4 : selector.offset + selector.length])
    if len(raw) < 32 or raw[2] != 1:
        return None
    mask, value = struct.unpack_from(">II", raw, 16)  # network order
    (offset,) = struct.unpack_from("=i", raw, 24)  # host order
    if mask != 0xFFFFFFFF or offset != 16:
        return None
    return socket.inet_ntoa(struct.pack(">I", value))
