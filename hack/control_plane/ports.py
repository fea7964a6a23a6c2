"""Loopback ports for the servers the tests and benchmarks start (control planes, webhooks, metrics endpoints).

A port chosen by binding port 0 is one of the kernel's ephemeral ports, the range every outgoing connection takes
its local port from: between choosing it and the server's bind, a client's connection can take it ("bind: address
already in use" — a real node plane's kube-controller-manager failed so under the suite's three workers). Ports are
chosen here below that range instead, where nothing binds unless asked to, each process of the suite from a slice
of its own (pytest-xdist's workers ``gw0``, ``gw1``, ... and, last, any other process), one after another from a
random start, each checked free by binding it, so that no two choices of one process repeat until its slice wraps.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pathlib
import random
import socket
import threading
from collections.abc import Iterator

SLICES = 8  # seven pytest-xdist workers and everything else
SPAN = 12_288  # ports below the ephemeral range shared out (1,536 a slice)
EPHEMERAL = pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_start(path: pathlib.Path = EPHEMERAL) -> int:
    """The first port of the kernel's ephemeral range (32768 when it cannot be read)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(path.read_text().split()[0])
    return 32_768


def slice_of(worker: str, below: int) -> range:
    """The ports of ``worker`` (``PYTEST_XDIST_WORKER``: ``gw<N>``; anything else takes the last slice) under
    ``below``, the ephemeral range's start: :data:`SPAN` ports under it, in :data:`SLICES` equal slices."""
    start = max(1024, below - SPAN)
    size = (below - start) // SLICES
    number = worker[2:]
    index = int(number) % (SLICES - 1) if worker.startswith("gw") and number.isdigit() else SLICES - 1
    return range(start + index * size, start + (index + 1) * size)


class Ports:
    """This process's ports: :meth:`take` returns ``count`` distinct ports free now, each held open until all are
    chosen."""

    def __init__(self, ports: range, first: int) -> None:
        self._cycle: Iterator[int] = itertools.islice(itertools.cycle(ports), ports.index(first), None)
        self._size = len(ports)
        self._lock = threading.Lock()

    def take(self, count: int) -> list[int]:
        with self._lock, contextlib.ExitStack() as held:
            chosen: list[int] = []
            for port in itertools.islice(self._cycle, self._size):
                probe = held.enter_context(socket.socket())
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue  # taken (a server of this process, or in TIME_WAIT)
                chosen.append(port)
                if len(chosen) == count:
                    return chosen
        raise OSError(f"fewer than {count} free loopback ports in {self._size} tried")


def _ports() -> Ports:
    ports = slice_of(os.environ.get("PYTEST_XDIST_WORKER", ""), ephemeral_start())
    return Ports(ports, random.choice(ports))


PORTS = _ports()


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports free now, outside the ephemeral range (see the module's docstring)."""
    return PORTS.take(count)


def free_port() -> int:
    return free_ports(1)[0]
