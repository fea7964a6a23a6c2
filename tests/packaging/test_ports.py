"""The loopback ports the suite's servers listen on: below the kernel's ephemeral range (where a client's connection
could take a port between its choice and the server's bind), a slice per pytest-xdist worker, never repeated."""

from __future__ import annotations

import pathlib
import socket

import pytest

from hack.control_plane.ports import SLICES, Ports, ephemeral_start, slice_of

pytestmark = pytest.mark.packaging


def test_each_worker_has_its_own_slice_below_the_ephemeral_range() -> None:
    # 32768 here: the 12,288 ports under it (20480-32767) in 8 slices of 1,536; gw0 first, a non-worker last
    assert slice_of("gw0", 32_768) == range(20_480, 22_016)
    assert slice_of("gw2", 32_768) == range(23_552, 25_088)
    assert slice_of("", 32_768) == range(31_232, 32_768)
    slices = [slice_of(f"gw{n}", 32_768) for n in range(SLICES - 1)] + [slice_of("", 32_768)]
    taken = [port for ports in slices for port in ports]
    assert len(taken) == len(set(taken)) and max(taken) < 32_768
    # an ephemeral range that starts low leaves what is above port 1023
    assert slice_of("gw0", 9_216).start == 1024 and slice_of("", 9_216).stop <= 9_216


def test_the_ephemeral_start_is_read_from_the_kernel(tmp_path: pathlib.Path) -> None:
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("40000\t60999\n")
    assert ephemeral_start(ranges) == 40_000
    assert ephemeral_start(tmp_path / "missing") == 32_768


def test_ports_are_free_distinct_and_skip_one_in_use() -> None:
    ports = slice_of("gw6", ephemeral_start())
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", ports[0]))
        busy.listen()
        chosen = Ports(ports, ports[0]).take(3)
    assert chosen[0] != ports[0] and len(set(chosen)) == 3
    assert all(port in ports for port in chosen)
    again = Ports(ports, ports[0])
    first, second = again.take(2), again.take(2)
    assert not set(first) & set(second)  # one process never repeats a port before its slice wraps
