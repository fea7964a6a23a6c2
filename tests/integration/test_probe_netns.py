"""The probe across real network namespaces joined by a veth pair (the kernel's network path, not loopback), and
with ``tc netem`` delay where the kernel has it. Where network namespaces cannot be made (not root, no ``ip``) the
tier is skipped with the reason, and fails under CI (``tests/support/prerequisites``). The netem test alone stays
optional: skipped where the kernel lacks ``sch_netem`` (``tc`` answers "Specified qdisc kind is unknown"), as this
project's CI machine's does."""

from __future__ import annotations

import contextlib
import pathlib
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from tests.support.prerequisites import network_namespaces, require

pytestmark = pytest.mark.integration

ROOT = pathlib.Path(__file__).resolve().parents[2]
A, B = "netaware-probe-a", "netaware-probe-b"
ADDRESS_B = "10.231.77.2"
PORT = 18765
NO_NETEM = ("qdisc kind is unknown", "No such file or directory")

ENDPOINT = textwrap.dedent(f"""
    import asyncio
    from operators.probe import serve_endpoint
    async def main():
        await serve_endpoint("0.0.0.0", {PORT})
        print("ready", flush=True)
        await asyncio.Event().wait()
    asyncio.run(main())
""")
MEASURE = textwrap.dedent(f"""
    import asyncio
    from operators.engine.measurement.probe import Peer
    from operators.probe import ProbeMetrics, ProbeOptions, Prober
    async def main():
        options = ProbeOptions("a", "default", "nt", "default", "", transactions=100, timeout=2)
        prober = Prober(options, None, ProbeMetrics())
        await prober.measure(Peer("b", "z", "{ADDRESS_B}", {PORT}))
        print(prober.windows["b"].p90())
    asyncio.run(main())
""")


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


@pytest.fixture
def namespaces() -> Iterator[None]:
    require(network_namespaces())
    for name in (A, B):
        ip("netns", "del", name, check=False)
        ip("netns", "add", name)
    try:
        ip("link", "add", "np-a", "type", "veth", "peer", "name", "np-b")
        ip("link", "set", "np-a", "netns", A)
        ip("link", "set", "np-b", "netns", B)
        ip("-n", A, "addr", "add", "10.231.77.1/24", "dev", "np-a")
        ip("-n", B, "addr", "add", f"{ADDRESS_B}/24", "dev", "np-b")
        for name, device in ((A, "np-a"), (B, "np-b")):
            ip("-n", name, "link", "set", device, "up")
            ip("-n", name, "link", "set", "lo", "up")
        yield
    finally:
        for name in (A, B):
            ip("netns", "del", name, check=False)


@contextlib.contextmanager
def endpoint_in_b() -> Iterator[None]:
    process = subprocess.Popen(
        ["ip", "netns", "exec", B, sys.executable, "-c", ENDPOINT], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        yield
    finally:
        process.terminate()
        process.wait(10)


def p90_from_a() -> float:
    done = subprocess.run(
        ["ip", "netns", "exec", A, sys.executable, "-c", MEASURE], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return float(done.stdout.strip())


def test_round_trips_across_a_veth_pair(namespaces: None) -> None:
    with endpoint_in_b():
        p90 = p90_from_a()
    assert 0 < p90 < 0.005, p90  # a veth pair: well under 5 ms


def test_netem_delay_moves_the_p90_by_that_delay(namespaces: None) -> None:
    done = subprocess.run(
        ["ip", "netns", "exec", A, "tc", "qdisc", "add", "dev", "np-a", "root", "netem", "delay", "20ms"],
        capture_output=True,
        text=True,
        check=False,
    )
    # The kernel lacks sch_netem ("Specified qdisc kind is unknown"; without extended acks, ENOENT): optional, a
    # skip even under CI, where this machine's kernel has no netem. Any other refusal fails.
    if done.returncode != 0 and any(sign in done.stderr for sign in NO_NETEM):
        pytest.skip(f"tc netem unavailable here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    with endpoint_in_b():
        time.sleep(0.1)
        p90 = p90_from_a()
    assert 0.020 <= p90 < 0.030, p90  # 20 ms added on the way out of a
