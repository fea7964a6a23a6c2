"""The agent's enforcement on the fake kernel (no root): the fake refuses what the kernel refuses, a pass from
nothing builds every class after its parent and every member after its leaf, a second pass changes nothing, a
renewed leaf takes its address before the old one goes, a removed pod leaves no class, member or metrics series."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from prometheus_client import generate_latest

from operators.agent.enforce import TcBackend, enforce
from operators.agent.fake import FakeKernel
from operators.agent.kernel import KernelError
from operators.agent.live import Agent, AgentMetrics, AgentOptions
from operators.engine.cluster.objects import Node, Pod
from operators.engine.enforcement.changes import DeleteClass, DeleteMember, HtbClass, SetClass, SetMember
from operators.engine.enforcement.plan import HOST_LEAF, ROOT_MINOR, NodePlan, node_plan
from tests.support.agent import slo

NODE = Node.parse({"metadata": {"name": "n1", "annotations": {"node.koordinator.sh/network-bandwidth": "1G"}}})
SLO = slo(
    {"resourceQOSStrategy": {"lsClass": {"networkQOS": {"enable": True, "egressRequest": 30, "egressLimit": 80}}}}
)


def pod(name: str, ip: str, request: str = "") -> Pod:
    """A pod asking ``request`` each way (none: no leaf rate of its own)."""
    both = {"kubernetes.io/egress-request": request, "kubernetes.io/ingress-request": request}
    annotations = both if request else {}
    return Pod.parse(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "annotations": annotations},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "podIP": ip, "qosClass": "Burstable"},
        }
    )


def planner(pods: Sequence[Pod]):  # type: ignore[no-untyped-def]
    return lambda previous: node_plan(NODE, SLO, pods, None, previous)


def klass(minor: int, parent: int) -> HtbClass:
    return HtbClass(minor, parent, 1000, 2000, 0)


# ---- the fake is as strict as the kernel ---------------------------------------------------------------------


def test_the_fake_refuses_what_the_kernel_refuses() -> None:
    kernel = FakeKernel()
    index = kernel.ensure_root("eth0")
    with pytest.raises(KernelError, match="ENOENT"):  # a leaf under a class that does not exist
        kernel.apply_classes(index, [SetClass(klass(0x100, 0x1), new=True)])
    kernel.apply_classes(index, [SetClass(klass(0x1, 0), new=True), SetClass(klass(0x100, 0x1), new=True)])
    with pytest.raises(KernelError, match="EEXIST"):  # the same class added twice
        kernel.apply_classes(index, [SetClass(klass(0x100, 0x1), new=True)])
    with pytest.raises(KernelError, match="EBUSY"):  # a class with a child
        kernel.apply_classes(index, [DeleteClass(0x1)])
    with pytest.raises(KernelError, match="ENOENT"):  # changing a class that is not there
        kernel.apply_classes(index, [SetClass(klass(0x101, 0x1), new=False)])
    with pytest.raises(KernelError, match="ENOENT"):  # a map before its table
        kernel.apply_map([SetMember("10.0.0.2", 0x100)])
    kernel.ensure_table()
    kernel.apply_map([SetMember("10.0.0.2", 0x100)])
    with pytest.raises(KernelError, match="EEXIST"):  # an address mapped twice; the script is one transaction:
        kernel.apply_map([SetMember("10.0.0.3", 0x100), SetMember("10.0.0.2", 0x100)])
    assert kernel.table == {"10.0.0.2": 0x100}  # ... so 10.0.0.3 is not mapped either
    ifb = kernel.ensure_root(kernel.ifb) if kernel.ensure_ifb() else -1
    kernel.apply_classes(ifb, [SetClass(klass(0x1, 0), new=True), SetClass(klass(0x100, 0x1), new=True)])
    kernel.apply_filters(ifb, [SetMember("10.0.0.2", 0x100)])
    with pytest.raises(KernelError, match="EBUSY"):  # a leaf a u32 filter is bound to
        kernel.apply_classes(ifb, [DeleteClass(0x100)])
    with pytest.raises(KernelError, match="ENOENT"):
        kernel.apply_filters(ifb, [DeleteMember("10.0.0.9", 0x105)])
    kernel.foreign_root("eth0", "fq_codel")
    with pytest.raises(KernelError, match="did not create"):
        kernel.ensure_root("eth0")


# ---- enforcement on it ----------------------------------------------------------------------------------------


def test_a_pass_from_nothing_builds_parents_first_and_a_second_pass_changes_nothing() -> None:
    kernel = FakeKernel()
    pods = [pod("web", "10.0.0.2", "100M"), pod("db", "10.0.0.3")]
    first = enforce(kernel, planner(pods))
    assert first.problems == [] and first.applied
    # egress: the root qdisc 1, the nftables table, map and chain 3, classes root + 4 + host + 2 leaves = 8, two
    # map elements; ingress: the ifb (add, alias, up) 3, its root 1, the ingress qdisc and redirect 2, the same 8
    # classes, two u32 filters: 14 + 16
    assert first.operations == 30
    egress, _ = kernel.state("egress")
    ingress, _ = kernel.state("ingress")
    plan: NodePlan = first.plan
    leaves = {p.ip: p.minor for p in plan.directions["egress"].pods}
    assert egress.members == leaves and ingress.members == {p.ip: p.minor for p in plan.directions["ingress"].pods}
    assert {ROOT_MINOR, HOST_LEAF} <= set(egress.classes) and len(egress.classes) == 8
    second = enforce(kernel, planner(pods))
    assert (second.operations, second.problems, second.applied) == (0, [], True)


def test_a_raised_request_moves_the_address_before_the_old_leaf_goes_and_a_removed_pod_leaves_nothing() -> None:
    kernel, owners = FakeKernel(), {}  # type: ignore[var-annotated]
    web, db = pod("web", "10.0.0.2", "100M"), pod("db", "10.0.0.3")
    enforce(kernel, planner([web, db]), owners=owners)
    old = kernel.state("ingress")[0].members["10.0.0.2"]
    raised = enforce(kernel, planner([pod("web", "10.0.0.2", "200M"), db]), owners=owners)
    assert raised.problems == []  # the fake refuses a class deleted while a filter is bound: none was
    moved = kernel.state("ingress")[0].members["10.0.0.2"]
    assert moved != old and old in kernel.state("ingress")[0].classes  # the old leaf drains until the next pass
    drained = enforce(kernel, planner([pod("web", "10.0.0.2", "200M"), db]), owners=owners)
    assert drained.problems == [] and old not in kernel.state("ingress")[0].classes
    gone = enforce(kernel, planner([db]), owners=owners)
    assert gone.problems == []
    for direction in ("egress", "ingress"):
        state, _ = kernel.state(direction)
        assert set(state.members) == {"10.0.0.3"}
        assert moved not in state.classes and len(state.classes) == 7


async def test_a_removed_pods_series_leave_metrics_when_measured_from_the_fake_kernels_counters() -> None:
    kernel = FakeKernel()
    backend = TcBackend(kernel)
    live = Agent(kernel, backend, None, AgentOptions("n1", dry_run=True), AgentMetrics())  # type: ignore[arg-type]
    web, db = pod("web", "10.0.0.2", "100M"), pod("db", "10.0.0.3")
    first = backend.enforce(planner([web, db]), dry_run=False)
    leaf = {p.key: p.minor for p in first.plan.directions["egress"].pods}
    kernel.send("eth0", leaf["ns/db"], 5000)
    await live._measure(None, backend.enforce(planner([web, db]), dry_run=False))
    text = generate_latest(live.metrics.registry).decode()
    assert 'netaware_agent_pod_bytes_total{direction="egress",pod="ns/db"} 5000.0' in text
    kernel.send("eth0", leaf["ns/db"], 1000)
    await live._measure(None, backend.enforce(planner([web, db]), dry_run=False))
    text = generate_latest(live.metrics.registry).decode()
    assert 'netaware_agent_pod_rate_bits_per_second{direction="egress",pod="ns/db"}' in text
    await live._measure(None, backend.enforce(planner([web]), dry_run=False))
    text = generate_latest(live.metrics.registry).decode()
    assert 'pod="ns/db"' not in text  # neither its bytes nor its rate
    assert 'netaware_agent_pod_bytes_total{direction="egress",pod="ns/web"}' in text
