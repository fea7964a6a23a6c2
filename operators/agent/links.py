"""The agent's devices in the kernel (pyroute2): the interface, the ifb it makes for ingress, the NIC's speed; the
constants and the error every part of the kernel shell shares, and the netlink call that counts operations."""

from __future__ import annotations

import socket
import subprocess
from typing import Any

import pyroute2
from pyroute2.netlink.exceptions import NetlinkError

from operators.engine.enforcement.changes import (
    MAJOR,
)

ROOT_HANDLE = MAJOR << 16
INGRESS_HANDLE = 0xFFFF0000
REDIRECT_PREF = 0x4E41  # the redirect filter's priority on the interface's ingress qdisc
MEMBER_PREF = 100  # the per-pod u32 filters' priority on the ifb
IFB_ALIAS = "netaware agent ingress"
TABLE = "netaware"
ETH_P_IP, ETH_P_ALL = 0x0800, 0x0003


class KernelError(Exception):
    """A device, qdisc or table the agent cannot use as it is (a condition and an Event, never a crash)."""


class Netlink:
    """One interface (in network namespace ``netns`` when given: the tests' nodes): its devices through pyroute2,
    and the count of changes made (:attr:`operations`)."""

    def __init__(self, interface: str, ifb: str, netns: str | None = None):
        self.interface, self.ifb, self.netns = interface, ifb, netns
        self.operations = 0
        self._table_read: list[dict[str, Any]] | None = None  # read_map's listing, for this pass's ensure_table
        # pyroute2 is untyped and builds its methods at run time
        iproute: Any = getattr(pyroute2, "IPRoute")  # noqa: B009
        self._ipr: Any = iproute(netns=netns) if netns else iproute()

    def close(self) -> None:
        self._ipr.close()

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

    def _call(self, method: str, *args: Any, **kwargs: Any) -> None:
        self.operations += 1
        try:
            getattr(self._ipr, method)(*args, **kwargs)
        except NetlinkError as error:
            raise KernelError(f"{method} {' '.join(map(str, args))}: {error.args[-1]} (errno {error.code})") from None
