"""Without the nft command the egress classifier says what is missing (a KernelError the agent reports as a
problem of the pass, as a dry run shows), never an unexpected FileNotFoundError."""

from __future__ import annotations

import pathlib

import pytest

from operators.agent.kernel import KernelError
from operators.agent.nft import Nftables


def test_a_missing_nft_command_is_a_kernel_error_naming_the_package(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no nft
    table = Nftables("lo", "netaware-ifb")
    try:
        with pytest.raises(KernelError, match=r"the nft command is not installed \(Debian package nftables\)"):
            table.read_map()
        with pytest.raises(KernelError, match="nft command is not installed"):
            table.ensure_table()
    finally:
        table.close()
