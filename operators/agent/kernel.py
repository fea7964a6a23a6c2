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

from operators.agent.links import ETH_P_ALL, IFB_ALIAS, INGRESS_HANDLE, REDIRECT_PREF, ROOT_HANDLE, TABLE, KernelError
from operators.agent.nft import Nftables
from operators.agent.tc import TrafficControl
from operators.engine.enforcement.changes import (
    MAJOR,
    DeviceState,
)

__all__ = ["Kernel", "KernelError"]


class Kernel(TrafficControl, Nftables):
    """tc and nftables on one interface (in network namespace ``netns`` when given: the tests' nodes): devices
    (:mod:`.links`), HTB and u32 (:mod:`.tc`), the nftables classifier (:mod:`.nft`); what a pass reads and how
    the agent's objects are removed."""

    def state(self, direction: str) -> tuple[DeviceState, dict[int, int]]:
        """The agent's objects for one direction and the bytes each class sent (empty when the device has none)."""
        device = self.interface if direction == "egress" else self.ifb
        index = self.index(device)
        if index is None:
            return DeviceState({}, {}), {}
        # the members first and the counters last: a pass stamps the counters' time when this returns, and the
        # map's listing is a subprocess (tens to hundreds of ms on a loaded node) that would otherwise fall
        # between the read and its stamp, by a different amount each pass (a 1 s rate measured 6.8 % high in CI)
        members = self.read_map() if direction == "egress" else self.read_filters(index)
        classes, counted = self.read_classes(index)
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
