"""The live agent's loop, without a kernel: what it publishes on /metrics, what it says when its cleanup fails,
and where it reads the NIC's speed (never on the event loop)."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest
from prometheus_client import generate_latest

from operators.agent.enforce import Meter, PassResult
from operators.agent.live import Agent, AgentMetrics, AgentOptions
from operators.engine.cluster.objects import Node, Pod
from operators.engine.enforcement.plan import node_plan


def pod(name: str, ip: str) -> Pod:
    return Pod.parse(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "podIP": ip, "qosClass": "Burstable"},
        }
    )


def result(pods: list[Pod]) -> PassResult:
    node = Node.parse({"metadata": {"name": "n1", "annotations": {"node.koordinator.sh/network-bandwidth": "1G"}}})
    plan = node_plan(node, None, pods)
    counters = {d: {p.minor: 1000 for p in plan.directions[d].pods} for d in plan.directions}
    return PassResult(plan, 0, [], counters, applied=True)


class Kernel:
    interface = "eth0"

    def __init__(self) -> None:
        self.speed_thread = ""

    def speed(self) -> int | None:
        self.speed_thread = threading.current_thread().name
        return None


def agent(options: AgentOptions, backend: Any = None, kernel: Any = None) -> Agent:
    return Agent(kernel or Kernel(), backend, None, options, AgentMetrics())  # type: ignore[arg-type]


async def test_a_deleted_pods_byte_counter_leaves_metrics() -> None:
    live = agent(AgentOptions("n1", dry_run=True))
    await live._measure(None, result([pod("web", "10.0.0.2"), pod("gone", "10.0.0.3")]))
    text = generate_latest(live.metrics.registry).decode()
    assert 'netaware_agent_pod_bytes_total{direction="egress",pod="ns/gone"} 1000.0' in text
    assert "# TYPE netaware_agent_pod_bytes_total counter" in text  # kernel counters as counters: rate() applies
    assert "# TYPE netaware_agent_class_bytes_total counter" in text
    await live._measure(None, result([pod("web", "10.0.0.2")]))
    text = generate_latest(live.metrics.registry).decode()
    assert 'pod="ns/gone"' not in text
    assert 'netaware_agent_pod_bytes_total{direction="egress",pod="ns/web"} 1000.0' in text


async def rates_text(clock: list[float], first_at: dict[str, float], second_at: dict[str, float]) -> str:
    """The agent's metrics after two measurements of pod web: 1,000 bytes per class read at ``first_at``, 126,000
    at ``second_at`` (per direction), the meter's clock giving ``clock``."""
    ticks = iter(clock)
    live = agent(AgentOptions("n1", dry_run=True))
    live.meter = Meter(clock=lambda: next(ticks))
    first = result([pod("web", "10.0.0.2")])
    first.counted_at = first_at
    second = result([pod("web", "10.0.0.2")])
    second.counters = {d: {minor: 126_000 for minor in counted} for d, counted in second.counters.items()}
    second.counted_at = second_at
    await live._measure(None, first)
    await live._measure(None, second)
    return generate_latest(live.metrics.registry).decode()


async def test_rates_divide_by_when_the_counters_were_read() -> None:
    """The counters are read at the start of a pass; Events and API writes come before the measurement. Read at
    t = 10 s and t = 11 s (1,000 then 126,000 bytes: 1 Mbit/s), measured 0.3 s and 0.1 s later: still 1 Mbit/s
    (divided by the measurement times, 0.8 s: 1.25 Mbit/s, the error the e2e test once saw as 7 %)."""
    text = await rates_text([10.3, 11.1], {"egress": 10.0, "ingress": 10.0}, {"egress": 11.0, "ingress": 11.0})
    assert 'netaware_agent_pod_rate_bits_per_second{direction="egress",pod="ns/web"} 1e+06' in text


async def test_each_direction_divides_by_the_time_of_its_own_read() -> None:
    """The two directions' counters are two reads; on a loaded node the second (ingress) can come long after the
    first. Egress read at t = 10 s and 11 s, ingress at 10.5 s and 11 s (126,000 - 1,000 bytes each): egress
    1 Mbit/s over its 1 s, ingress 2 Mbit/s over its 0.5 s. One time for both (taken after the ingress read: 10.5
    and 11) made egress 2 Mbit/s, double what it sent."""
    text = await rates_text([12.0, 12.0], {"egress": 10.0, "ingress": 10.5}, {"egress": 11.0, "ingress": 11.0})
    assert 'netaware_agent_pod_rate_bits_per_second{direction="egress",pod="ns/web"} 1e+06' in text
    assert 'netaware_agent_pod_rate_bits_per_second{direction="ingress",pod="ns/web"} 2e+06' in text


class FailingCleanup:
    measures = False

    def cleanup(self) -> list[str]:
        raise OSError("netlink: Operation not permitted")


async def test_a_cleanup_that_fails_on_stop_is_logged(caplog: pytest.LogCaptureFixture, monkeypatch: Any) -> None:
    live = agent(AgentOptions("n1", daemonset="ns/netaware-agent"), FailingCleanup())

    async def gone(*_: Any) -> None:
        return None  # the DaemonSet is gone: uninstall

    monkeypatch.setattr("operators.agent.live.send_json", gone)

    async def synced() -> None:
        return None

    live.cache = type("Cache", (), {"subscribe": lambda *_: None, "wait_synced": staticmethod(synced)})()
    stop = asyncio.Event()
    stop.set()
    with caplog.at_level(logging.WARNING, logger="netaware.agent"):
        await live.run(None, stop)
    assert any(
        "the cleanup on stop did not complete: OSError: netlink: Operation not permitted" in r.getMessage()
        for r in caplog.records
    ), [r.getMessage() for r in caplog.records]


async def test_the_nics_speed_is_read_in_the_netlink_thread(monkeypatch: Any) -> None:
    kernel = Kernel()
    live = agent(AgentOptions("n1", publish_capacity=True), kernel=kernel)
    events: list[str] = []

    async def event(*args: Any) -> None:
        events.append(args[3])

    monkeypatch.setattr("operators.agent.live.post_event", event)
    live.cache = type("Cache", (), {"raw": lambda *_: {"metadata": {"name": "n1"}}})()
    await live._publish_capacity(None)
    assert kernel.speed_thread.startswith("netlink")
    assert events == ["NetworkSpeedUnknown"]
    live._worker.shutdown(wait=True)
