"""An in-memory kernel for the agent's tests (no root, no netlink), as strict as the real one where the agent
could go wrong: it refuses what the kernel refuses.

- a class added under a handle that exists (``EEXIST``), under a parent class that does not (``ENOENT``), or on
  a device with no root qdisc; a class changed or deleted that does not exist, deleted while it has children or
  a u32 filter bound to it (``EBUSY``, as HTB answers);
- a u32 filter added under a handle in use, or deleted when absent;
- an nftables element added when its address is mapped already, or deleted when it is not; a script applies
  whole or not at all (one transaction), and only once the table exists;
- a root qdisc on a device that does not exist, or one of someone else's (:meth:`foreign_root`).

It counts operations as :class:`~operators.agent.kernel.Kernel` does (one per netlink request, one per
nftables line) and holds byte counters per class that a test advances (:meth:`send`).
"""

from __future__ import annotations

import errno
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from operators.agent.kernel import KernelError
from operators.engine.enforcement.changes import (
    Change,
    DeleteClass,
    DeleteMember,
    DeviceState,
    HtbClass,
    MoveMember,
    SetClass,
    SetMember,
)


@dataclass
class FakeDevice:
    index: int
    root: str | None = None  # "agent" (its HTB root), another kind's name, or None (the kernel's default)
    classes: dict[int, HtbClass] = field(default_factory=dict)
    filters: dict[int, str] = field(default_factory=dict)  # u32 handle (a leaf minor) -> destination address
    sent: dict[int, int] = field(default_factory=dict)  # class minor -> bytes
    redirect: bool = False  # the ingress redirect to the ifb (on the interface)


class FakeKernel:
    def __init__(self, interface: str = "eth0", ifb: str = "netaware-ifb", speed: int | None = None):
        self.interface, self.ifb = interface, ifb
        self.operations = 0
        self.devices: dict[str, FakeDevice] = {interface: FakeDevice(2)}
        self.table: dict[str, int] | None = None  # the nftables map: address -> leaf minor (None: no table)
        self._speed = speed

    # ---- what tests arrange ----------------------------------------------------------------------------------

    def foreign_root(self, device: str, kind: str = "fq_codel") -> None:
        self.devices[device].root = kind

    def send(self, device: str, minor: int, count: int) -> None:
        """``count`` bytes sent through class ``minor`` (and its ancestors, as HTB counts them)."""
        here = self.devices[device]
        while minor in here.classes:
            here.sent[minor] = here.sent.get(minor, 0) + count
            parent = here.classes[minor].parent
            if parent == 0:
                break
            minor = parent

    # ---- the Kernel's interface ------------------------------------------------------------------------------

    def close(self) -> None:
        pass

    def index(self, name: str) -> int | None:
        device = self.devices.get(name)
        return device.index if device is not None else None

    def default_interface(self) -> str | None:
        return self.interface

    def speed(self) -> int | None:
        return self._speed

    def ensure_ifb(self) -> int:
        if self.ifb not in self.devices:
            self.operations += 3  # link add, its alias, up
            self.devices[self.ifb] = FakeDevice(max(d.index for d in self.devices.values()) + 1)
        return self.devices[self.ifb].index

    def ensure_root(self, device: str) -> int:
        here = self._device(device)
        if here.root is None:
            self.operations += 1
            here.root = "agent"
        elif here.root != "agent":
            raise KernelError(f"device {device!r} has a root qdisc {here.root}: the agent did not create")
        return here.index

    def ensure_table(self) -> None:
        if self.table is None:
            self.operations += 3
            self.table = {}

    def ensure_redirect(self, ifb_index: int) -> None:
        here = self._device(self.interface)
        if not here.redirect:
            self.operations += 2  # the ingress qdisc and the redirect filter
            here.redirect = True

    def apply_classes(self, index: int, changes: Iterable[Change]) -> None:
        here = self._by_index(index)
        for change in changes:
            self.operations += 1
            if isinstance(change, DeleteClass):
                self._delete_class(here, change.minor)
            elif isinstance(change, SetClass):
                self._set_class(here, change)

    def apply_filters(self, index: int, changes: Iterable[Change]) -> None:
        here = self._by_index(index)
        for change in changes:
            if isinstance(change, DeleteMember):
                self._delete_filter(here, change.minor)
            elif isinstance(change, SetMember):
                self._add_filter(here, change.ip, change.minor)
            elif isinstance(change, MoveMember):  # the new filter first, as the kernel module does
                self._add_filter(here, change.ip, change.new)
                self._delete_filter(here, change.old)

    def apply_map(self, changes: Sequence[Change]) -> None:
        if not changes:
            return
        if self.table is None:
            raise _error("nft", errno.ENOENT, "no table ip netaware")
        staged = dict(self.table)
        lines = 0
        for change in changes:
            if isinstance(change, DeleteMember | MoveMember):
                lines += 1
                if change.ip not in staged:
                    raise _error("nft delete element", errno.ENOENT, change.ip)
                del staged[change.ip]
            if isinstance(change, SetMember | MoveMember):
                lines += 1
                if change.ip in staged:
                    raise _error("nft add element", errno.EEXIST, change.ip)
                staged[change.ip] = change.new if isinstance(change, MoveMember) else change.minor
        self.operations += lines
        self.table = staged  # one transaction: all of it or nothing

    def state(self, direction: str) -> tuple[DeviceState, dict[int, int]]:
        device = self.interface if direction == "egress" else self.ifb
        here = self.devices.get(device)
        if here is None:
            return DeviceState({}, {}), {}
        filtered = {ip: minor for minor, ip in here.filters.items()}
        members = dict(self.table or {}) if direction == "egress" else filtered
        return DeviceState(dict(here.classes), members), {minor: here.sent.get(minor, 0) for minor in here.classes}

    def cleanup(self) -> list[str]:
        removed = []
        main = self.devices[self.interface]
        if main.root == "agent":
            self.operations += 1
            main.root, main.classes, main.sent = None, {}, {}
            removed.append(f"root qdisc on {self.interface}")
        if main.redirect:
            self.operations += 2
            main.redirect = False
            removed.append(f"ingress redirect on {self.interface}")
        if self.ifb in self.devices:
            self.operations += 1
            del self.devices[self.ifb]
            removed.append(f"device {self.ifb}")
        if self.table is not None:
            self.operations += 1
            self.table = None
            removed.append("nftables table ip netaware")
        return removed

    # ---- the kernel's rules ------------------------------------------------------------------------------------

    def _device(self, name: str) -> FakeDevice:
        if name not in self.devices:
            raise KernelError(f"device {name!r}: No such device (errno {errno.ENODEV})")
        return self.devices[name]

    def _by_index(self, index: int) -> FakeDevice:
        for device in self.devices.values():
            if device.index == index:
                return device
        raise _error("tc", errno.ENODEV, f"index {index}")

    @staticmethod
    def _set_class(here: FakeDevice, change: SetClass) -> None:
        klass = change.klass
        if here.root != "agent":
            raise _error("tc add-class", errno.EINVAL, "no HTB root qdisc")
        if change.new:
            if klass.minor in here.classes:
                raise _error("tc add-class", errno.EEXIST, f"class {klass.minor:x} exists")
            if klass.parent != 0 and klass.parent not in here.classes:
                raise _error("tc add-class", errno.ENOENT, f"parent class {klass.parent:x} of {klass.minor:x}")
        else:
            held = here.classes.get(klass.minor)
            if held is None:
                raise _error("tc change-class", errno.ENOENT, f"class {klass.minor:x}")
            if held.parent != klass.parent:
                raise _error("tc change-class", errno.EINVAL, f"class {klass.minor:x} cannot change its parent")
        here.classes[klass.minor] = klass
        here.sent.setdefault(klass.minor, 0)

    @staticmethod
    def _delete_class(here: FakeDevice, minor: int) -> None:
        if minor not in here.classes:
            raise _error("tc del-class", errno.ENOENT, f"class {minor:x}")
        if any(klass.parent == minor for klass in here.classes.values()) or minor in here.filters:
            raise _error("tc del-class", errno.EBUSY, f"class {minor:x} has children or a filter bound")
        del here.classes[minor]
        here.sent.pop(minor, None)

    def _add_filter(self, here: FakeDevice, ip: str, minor: int) -> None:
        self.operations += 1
        if minor in here.filters:
            raise _error("tc add-filter", errno.EEXIST, f"u32 handle {minor:x}")
        here.filters[minor] = ip

    def _delete_filter(self, here: FakeDevice, minor: int) -> None:
        self.operations += 1
        if minor not in here.filters:
            raise _error("tc del-filter", errno.ENOENT, f"u32 handle {minor:x}")
        del here.filters[minor]


def _error(what: str, code: int, detail: str) -> KernelError:
    return KernelError(f"{what} {detail}: {errno.errorcode.get(code, code)} (errno {code})")
