"""The agent's hands in the kernel (imperative shell over :mod:`operators.engine.enforcement`): pyroute2 for tc and
links, ``nft -j`` for the egress classifier. It reads back only what it owns and changes only that:

- **egress**: an HTB root ``4e41:`` on the interface; pods classified by source address through the nftables
  map ``ip netaware egress`` (address -> class id, with per-element counters) by ``meta priority set`` in a
  postrouting chain at priority -150 (before SNAT, so a masqueraded pod keeps its class);
- **ingress**: the interface's ``ingress`` qdisc redirects everything (``u32`` match-all at pref
  :data:`REDIRECT_PREF`, ``mirred``) to the agent's ifb device, which carries the same HTB tree; pods classified
  by destination address with one ``u32`` filter each (handle ``800::<leaf minor>``) — the netfilter hooks run
  after tc ingress, so nftables cannot classify there.

Ownership: a root qdisc with handle ``4e41:`` (any other non-default root is foreign and left alone, reported);
the ifb by name and alias; an ingress qdisc the agent found with its redirect filter in it; the nftables table by
name. Every change counts in :attr:`Kernel.operations` (one netlink request, or one nftables element).
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyroute2
from pyroute2.netlink.exceptions import NetlinkError

from operators.engine.enforcement.changes import (
    MAJOR,
    QUANTUM,
    Change,
    DeleteClass,
    DeleteMember,
    DeviceState,
    HtbClass,
    MoveMember,
    SetClass,
    SetMember,
)
from operators.engine.enforcement.plan import HOST_LEAF

ROOT_HANDLE = MAJOR << 16
INGRESS_HANDLE = 0xFFFF0000
REDIRECT_PREF = 0x4E41  # the redirect filter's priority on the interface's ingress qdisc
MEMBER_PREF = 100  # the per-pod u32 filters' priority on the ifb
IFB_ALIAS = "netaware agent ingress"
TABLE = "netaware"
ETH_P_IP, ETH_P_ALL = 0x0800, 0x0003


class KernelError(Exception):
    """A device, qdisc or table the agent cannot use as it is (a condition and an Event, never a crash)."""


class Kernel:
    """tc and nftables on one interface (in network namespace ``netns`` when given: the tests' nodes)."""

    def __init__(self, interface: str, ifb: str, netns: str | None = None):
        self.interface, self.ifb, self.netns = interface, ifb, netns
        self.operations = 0
        self._table_read: list[dict[str, Any]] | None = None  # read_map's listing, for this pass's ensure_table
        # pyroute2 is untyped and builds its methods at run time
        iproute: Any = getattr(pyroute2, "IPRoute")  # noqa: B009
        self._ipr: Any = iproute(netns=netns) if netns else iproute()

    def close(self) -> None:
        self._ipr.close()

    # ---- devices --------------------------------------------------------------------------------------------

    def index(self, name: str) -> int | None:
        found = self._ipr.link_lookup(ifname=name)
        return int(found[0]) if found else None

    def _index(self, name: str) -> int:
        index = self.index(name)
        if index is None:
            raise KernelError(f"device {name!r} does not exist")
        return index

    def default_interface(self) -> str | None:
        """The device of the IPv4 default route (the NIC koordlet shapes too)."""
        for route in self._ipr.get_default_routes(family=socket.AF_INET):
            index = route.get_attr("RTA_OIF")
            if index is not None:
                return str(self._ipr.get_links(index)[0].get_attr("IFLA_IFNAME"))
        return None

    def speed(self) -> int | None:
        """The interface's speed in bits/s from ``/sys/class/net/<if>/speed`` (None: no speed, a virtual NIC)."""
        path = f"/sys/class/net/{self.interface}/speed"
        try:
            if self.netns:  # that namespace's sysfs (``ip netns exec`` mounts it)
                text = subprocess.run(
                    ["ip", "netns", "exec", self.netns, "cat", path],
                    capture_output=True,
                    text=True,
                    timeout=10,
                    check=False,
                ).stdout
            else:
                with open(path) as handle:
                    text = handle.read()
            megabits = int(text.strip())
        except (OSError, ValueError, subprocess.SubprocessError):
            return None
        return megabits * 1_000_000 if megabits > 0 else None

    def ensure_ifb(self) -> int:
        """The agent's ifb device, up (created when absent; one of the same name without the agent's alias is
        foreign)."""
        index = self.index(self.ifb)
        if index is None:
            self._call("link", "add", ifname=self.ifb, kind="ifb")
            index = self._index(self.ifb)
            self._call("link", "set", index=index, ifalias=IFB_ALIAS)
        elif self._ipr.get_links(index)[0].get_attr("IFLA_IFALIAS") != IFB_ALIAS:
            raise KernelError(f"device {self.ifb!r} exists and is not the agent's (no alias {IFB_ALIAS!r})")
        if not self._ipr.get_links(index)[0]["flags"] & 1:
            self._call("link", "set", index=index, state="up")
        return index

    # ---- the HTB tree ---------------------------------------------------------------------------------------

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

    # ---- ingress: the redirect and the per-pod u32 filters ----------------------------------------------------

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

    # ---- egress: the nftables map -----------------------------------------------------------------------------

    def ensure_table(self) -> None:
        """The nftables table, map and chain (created when absent; the chain's interface kept current)."""
        chain = f'oifname "{self.interface}" meta priority set ip saddr map @egress'
        listed, self._table_read = self._table_read or self._list_table(), None
        if listed is not None:
            rules = [item["rule"] for item in listed if "rule" in item]
            if len(rules) == 1 and _rule_interface(rules[0]) == self.interface:
                return
            self._nft(f"flush chain ip {TABLE} classify\nadd rule ip {TABLE} classify {chain}\n", 1)
            return
        self._nft(
            f"add table ip {TABLE}\n"
            f"add map ip {TABLE} egress {{ type ipv4_addr : classid; counter; }}\n"
            f"add chain ip {TABLE} classify {{ type filter hook postrouting priority -150; policy accept; }}\n"
            f"add rule ip {TABLE} classify {chain}\n",
            3,
        )

    def read_map(self) -> dict[str, int]:
        """Source address -> leaf minor of the egress map (its per-element counters are for `nft list map`). The
        whole table is listed, once per pass: :meth:`ensure_table` checks the chain from the same listing."""
        listed = self._table_read = self._list_table()
        members = {}
        for item in listed or []:
            for key, value in (item.get("map") or {}).get("elem") or []:
                element = key.get("elem", {}) if isinstance(key, dict) else {}
                address = element.get("val", key) if isinstance(key, dict) else key
                classid = str(value)
                if ":" in classid:
                    members[str(address)] = int(classid.split(":")[1], 16)
        return members

    def _list_table(self) -> list[dict[str, Any]] | None:
        """The agent's nftables table, map elements and chain included (None: there is none)."""
        return self._nft_json(["list", "table", "ip", TABLE], missing_ok=True)

    def apply_map(self, changes: Sequence[Change]) -> None:
        lines = []
        for change in changes:
            if isinstance(change, DeleteMember | MoveMember):  # a move: one nft script is one transaction, so
                lines.append(f"delete element ip {TABLE} egress {{ {change.ip} }}")  # the address is never unmapped
            if isinstance(change, SetMember | MoveMember):
                minor = change.new if isinstance(change, MoveMember) else change.minor
                lines.append(f"add element ip {TABLE} egress {{ {change.ip} : {MAJOR:x}:{minor:x} }}")
        if lines:
            self._nft("\n".join(lines) + "\n", len(lines))

    # ---- state and cleanup ------------------------------------------------------------------------------------

    def state(self, direction: str) -> tuple[DeviceState, dict[int, int]]:
        """The agent's objects for one direction and the bytes each class sent (empty when the device has none)."""
        device = self.interface if direction == "egress" else self.ifb
        index = self.index(device)
        if index is None:
            return DeviceState({}, {}), {}
        classes, counted = self.read_classes(index)
        members = self.read_map() if direction == "egress" else self.read_filters(index)
        return DeviceState(classes, members), counted

    def cleanup(self) -> list[str]:
        """Remove everything the agent made; what was removed, one line each."""
        self._table_read = None
        removed = []
        index = self.index(self.interface)
        if index is not None:
            if self._root(index) == ("htb", ROOT_HANDLE):
                self._call("tc", "del", "htb", index=index, handle=ROOT_HANDLE, parent=0xFFFFFFFF)
                removed.append(f"root qdisc {MAJOR:x}: on {self.interface}")
            if self._redirects(index):
                self._call(
                    "tc",
                    "del-filter",
                    kind="u32",
                    index=index,
                    parent=INGRESS_HANDLE,
                    prio=REDIRECT_PREF,
                    protocol=ETH_P_ALL,
                    target=0,
                    keys=[],
                )
                removed.append(f"ingress redirect on {self.interface}")
                if not list(self._ipr.get_filters(index=index, parent=INGRESS_HANDLE)):
                    self._call("tc", "del", "ingress", index=index, handle=INGRESS_HANDLE, parent=0xFFFFFFF1)
                    removed.append(f"ingress qdisc on {self.interface}")
        ifb = self.index(self.ifb)
        if ifb is not None and self._ipr.get_links(ifb)[0].get_attr("IFLA_IFALIAS") == IFB_ALIAS:
            self._call("link", "del", index=ifb)
            removed.append(f"device {self.ifb}")
        if self._list_table() is not None:
            self._nft(f"delete table ip {TABLE}\n", 1)
            removed.append(f"nftables table ip {TABLE}")
        return removed

    # ---- plumbing ---------------------------------------------------------------------------------------------

    def _call(self, method: str, *args: Any, **kwargs: Any) -> None:
        self.operations += 1
        try:
            getattr(self._ipr, method)(*args, **kwargs)
        except NetlinkError as error:
            raise KernelError(f"{method} {' '.join(map(str, args))}: {error.args[-1]} (errno {error.code})") from None

    def _nft_command(self) -> list[str]:
        return (["ip", "netns", "exec", self.netns] if self.netns else []) + ["nft"]

    def _nft(self, script: str, operations: int) -> None:
        self.operations += operations
        done = subprocess.run(
            [*self._nft_command(), "-f", "-"], input=script, capture_output=True, text=True, timeout=30, check=False
        )
        if done.returncode:
            raise KernelError(f"nft: {done.stderr.strip().splitlines()[0] if done.stderr.strip() else done.returncode}")

    def _nft_json(self, command: list[str], missing_ok: bool = False) -> list[dict[str, Any]] | None:
        done = subprocess.run(
            [*self._nft_command(), "-j", *command], capture_output=True, text=True, timeout=30, check=False
        )
        if done.returncode:
            if missing_ok and "No such file or directory" in done.stderr:
                return None
            raise KernelError(f"nft {' '.join(command)}: {done.stderr.strip()[:200]}")
        items: list[dict[str, Any]] = json.loads(done.stdout).get("nftables", [])
        return items


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


def _rule_interface(rule: Mapping[str, Any]) -> str | None:
    for statement in rule.get("expr") or []:
        match = statement.get("match") if isinstance(statement, dict) else None
        if match and (match.get("left") or {}).get("meta", {}).get("key") == "oifname":
            return str(match.get("right"))
    return None
