"""The agent's egress classifier through ``nft``: the table ``ip netaware``, the map ``egress`` (source address ->
class id, with per-element counters) and the postrouting chain that sets ``meta priority`` from it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from operators.agent.links import TABLE, KernelError, Netlink
from operators.engine.enforcement.changes import (
    MAJOR,
    Change,
    DeleteMember,
    MoveMember,
    SetMember,
)


class Nftables(Netlink):
    """The egress classifier: the table ``ip netaware``, its map (address -> class id) and chain, through
    ``nft``."""

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

    def _run(self, arguments: list[str], script: str | None = None) -> subprocess.CompletedProcess[str]:
        """``nft ARGUMENTS`` (in the interface's network namespace, when it has one)."""
        command = [*(("ip", "netns", "exec", self.netns) if self.netns else ()), "nft", *arguments]
        try:
            return subprocess.run(command, input=script, capture_output=True, text=True, timeout=30, check=False)
        except FileNotFoundError:
            raise KernelError("the nft command is not installed (Debian package nftables)") from None

    def _nft(self, script: str, operations: int) -> None:
        self.operations += operations
        done = self._run(["-f", "-"], script)
        if done.returncode:
            raise KernelError(f"nft: {done.stderr.strip().splitlines()[0] if done.stderr.strip() else done.returncode}")

    def _nft_json(self, command: list[str], missing_ok: bool = False) -> list[dict[str, Any]] | None:
        done = self._run(["-j", *command])
        if done.returncode:
            if missing_ok and "No such file or directory" in done.stderr:
                return None
            raise KernelError(f"nft {' '.join(command)}: {done.stderr.strip()[:200]}")
        items: list[dict[str, Any]] = json.loads(done.stdout).get("nftables", [])
        return items


def _rule_interface(rule: Mapping[str, Any]) -> str | None:
    for statement in rule.get("expr") or []:
        match = statement.get("match") if isinstance(statement, dict) else None
        if match and (match.get("left") or {}).get("meta", {}).get("key") == "oifname":
            return str(match.get("right"))
    return None
