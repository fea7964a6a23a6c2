"""The terway-qos backend: the files rendered from the plan (bytes/s, L1 = LSR + LS, L2 = BE, pod.json the object
keyed by UID that released terway-qos parses), read back by a reproduction of terway-qos's own parser
(:mod:`tests.engine.terway_qos_reference`), and the backend's writes (only on change, atomic, last good state kept,
cleanup). Expected values derived by hand: bits/s ÷ 8."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.agent.terway import TerwayBackend
from operators.engine.cluster.objects import Pod
from operators.engine.enforcement.plan import node_plan
from operators.engine.enforcement.terway import (
    CgroupLayout,
    global_bps_config,
    pod_cgroup_dir,
    pod_config,
    refusals,
    terway_files,
)
from tests.engine.terway_qos_reference import Refused, applied_priority, read_global_config, read_pod_config
from tests.support.agent import make_node, make_pod, slo

M = 1_000_000
SYSTEMD = CgroupLayout()
# A NodeSLO terway-qos can express: lsClass's limit plus beClass's limit within the total, in both directions.
STRATEGY = {
    "resourceQOSStrategy": {
        "lsClass": {
            "networkQOS": {
                "enable": True,
                "egressRequest": 30,
                "egressLimit": 80,
                "ingressRequest": "200M",
                "ingressLimit": 70,
            }
        },
        "beClass": {"networkQOS": {"enable": True, "egressRequest": 10, "egressLimit": 20, "ingressLimit": 30}},
    }
}


def config_lines(text: str) -> dict[str, int]:
    return {key: int(value) for key, value in (line.split(" ") for line in text.splitlines())}


def plan_for(strategy: dict[str, Any], pods: list[Any], total: str = "1G") -> Any:
    return node_plan(make_node({"node.koordinator.sh/network-bandwidth": total}), slo(strategy), pods)


def with_uid(pod: Pod, uid: str | None = None) -> Pod:
    raw = {**pod.raw, "metadata": {**pod.raw["metadata"], "uid": uid or f"uid-{pod.name}"}}
    return Pod.parse(raw)


def files(tmp_path: Path) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(tmp_path.iterdir())}


def test_global_config_is_bytes_per_second_l1_is_ls_and_l2_is_be() -> None:
    text = global_bps_config(plan_for(STRATEGY, []))
    assert config_lines(text) == {
        "hw_tx_bps_max": 125_000_000,  # 1 Gbit/s
        "hw_rx_bps_max": 125_000_000,
        "offline_l1_tx_bps_min": 37_500_000,  # ls egress 30 % of 1G = 300 Mbit/s
        "offline_l1_tx_bps_max": 100_000_000,  # 80 %
        "offline_l1_rx_bps_min": 25_000_000,  # ingressRequest "200M"
        "offline_l1_rx_bps_max": 87_500_000,  # 70 %
        "offline_l2_tx_bps_min": 12_500_000,  # be 10 %
        "offline_l2_tx_bps_max": 25_000_000,  # 20 %
        "offline_l2_rx_bps_min": 0,  # be asks nothing for ingress (HTB's minimum rate is not carried over)
        "offline_l2_rx_bps_max": 37_500_000,  # 30 %
    }
    assert text.endswith("\n") and len(text.splitlines()) == 10


def test_terway_qos_reads_the_global_config_as_written() -> None:
    """Parsed as terway-qos parses it (its regex per key, Default, Validate): the levels it enforces, L0 (system)
    getting the total less the L1 and L2 minima."""
    levels = read_global_config(global_bps_config(plan_for(STRATEGY, [])))
    egress, ingress = levels["egress"], levels["ingress"]
    assert (egress.hw_guaranteed, egress.l1_min, egress.l1_max, egress.l2_min, egress.l2_max) == (
        125_000_000,
        37_500_000,
        100_000_000,
        12_500_000,
        25_000_000,
    )
    assert egress.l0_min == 125_000_000 - 37_500_000 - 12_500_000 and egress.l0_max == 125_000_000
    assert (ingress.l1_min, ingress.l1_max, ingress.l2_max) == (25_000_000, 87_500_000, 37_500_000)


@pytest.mark.parametrize(
    ("strategy", "direction", "why"),
    [
        # the defaults: every limit 100 % (L1 max + L2 max = twice the total)
        (
            {"resourceQOSStrategy": {"lsClass": {"networkQOS": {"enable": True, "egressRequest": 10}}}},
            "tx",
            "L1's max (lsClass egressLimit, 125000000 B/s) plus L2's max (beClass egressLimit, 125000000 B/s) is "
            "above the node's 125000000 B/s",
        ),
        # netaware's own example: ls 80 % + be 50 % of egress
        (
            {
                "resourceQOSStrategy": {
                    "lsClass": {"networkQOS": {"enable": True, "egressLimit": 80, "ingressLimit": 50}},
                    "beClass": {"networkQOS": {"enable": True, "egressLimit": 50, "ingressLimit": 50}},
                }
            },
            "tx",
            "L1's max (lsClass egressLimit, 100000000 B/s) plus L2's max (beClass egressLimit, 62500000 B/s) is "
            "above the node's 125000000 B/s",
        ),
    ],
    ids=["defaults", "example"],
)
def test_a_nodeslo_terway_qos_would_refuse_is_reported_and_never_written(
    strategy: dict[str, Any], direction: str, why: str, tmp_path: Path
) -> None:
    plan = plan_for(strategy, [])
    with pytest.raises(Refused):  # what the old backend wrote: terway-qos refuses the whole file
        read_global_config(global_bps_config(plan))
    assert f"terway-qos would refuse global_bps_config ({direction}): {why}" in refusals(plan)
    written, problems = terway_files(plan, SYSTEMD)
    assert written == {} and problems and all("NodeSLO n1 cannot be expressed for terway-qos" in p for p in problems)
    result = TerwayBackend(tmp_path).enforce(lambda _: plan, dry_run=False)
    assert not result.applied and result.operations == 0 and files(tmp_path) == {}
    assert any(why in problem for problem in result.problems)


# lsClass 60 % + beClass 40 % of 1G in both directions: exactly the total, which terway-qos accepts.
FITS = {
    "resourceQOSStrategy": {
        "lsClass": {"networkQOS": {"enable": True, "egressLimit": 60, "ingressLimit": 60}},
        "beClass": {"networkQOS": {"enable": True, "egressLimit": 40, "ingressLimit": 40}},
    }
}
# FITS's levels, whatever its pods ask: no class requests anything (every min 0); L1's max lsClass's 60 % of
# 1 Gbit/s = 600 Mbit/s = 75,000,000 B/s; L2's max beClass's 40 % = 400 Mbit/s = 50,000,000 B/s; 75 + 50 = 125 M,
# the node's 125,000,000 B/s.
FITS_LEVELS = {
    "hw_tx_bps_max": 125_000_000,
    "hw_rx_bps_max": 125_000_000,
    "offline_l1_tx_bps_min": 0,
    "offline_l1_tx_bps_max": 75_000_000,
    "offline_l1_rx_bps_min": 0,
    "offline_l1_rx_bps_max": 75_000_000,
    "offline_l2_tx_bps_min": 0,
    "offline_l2_tx_bps_max": 50_000_000,
    "offline_l2_rx_bps_min": 0,
    "offline_l2_rx_bps_max": 50_000_000,
}


def pods_asking(label: str, annotations: dict[str, str], count: int = 2) -> list[Pod]:
    return [with_uid(make_pod(f"{label.lower()}{i}", label, annotations, ip=f"10.0.1.{i}")) for i in range(count)]


@pytest.mark.parametrize(
    "pods",
    [
        # LS's leaves need 2 x 350M = 700M egress, above lsClass's 600M: the tc class's rate and ceil rise to 700M
        # (before: L1's max 87,500,000 B/s, + 50,000,000 above the node's 125,000,000: nothing written)
        pods_asking("LS", {"kubernetes.io/egress-request": "350M"}),
        # 2 x 600M (each capped by lsClass's 600M) = 1.2G, above the node: every rate scaled to 83 %, LS's to
        # 999.98M (before: L1's max 124,997,500 B/s)
        pods_asking("LS", {"kubernetes.io/egress-request": "600M"}),
        # one LS pod whose own egress-bandwidth (1G) lets its 900M request past lsClass's 600M
        pods_asking("LS", {"kubernetes.io/egress-request": "900M", "kubernetes.io/egress-bandwidth": "1G"}, 1),
        # BE's leaves need 2 x 300M = 600M ingress, above beClass's 400M (before: L2's rx max 75,000,000 B/s)
        pods_asking("BE", {"kubernetes.io/ingress-request": "300M"}),
    ],
    ids=["ls-pods-above-the-limit", "ls-pods-above-the-total", "ls-pod-with-its-own-bandwidth", "be-pods-ingress"],
)
def test_pods_requests_never_lift_a_level_above_its_class_limit(pods: list[Pod], tmp_path: Path) -> None:
    """terway-qos has no per-pod minimum: the pods' requests are not its to honour, and a level's max stays its
    class's limit, so a NodeSLO whose limits fit is written (and terway-qos takes it) however much its pods ask."""
    plan = plan_for(FITS, pods)
    assert refusals(plan) == []
    result = TerwayBackend(tmp_path).enforce(lambda _: plan, dry_run=False)
    assert result.applied and result.operations == 2
    written = files(tmp_path)
    assert config_lines(written["global_bps_config"]) == FITS_LEVELS
    levels = read_global_config(written["global_bps_config"])  # terway-qos's parser, Default and Validate
    assert (levels["egress"].l1_max, levels["egress"].l2_max) == (75_000_000, 50_000_000)
    assert (levels["ingress"].l1_max, levels["ingress"].l2_max) == (75_000_000, 50_000_000)
    assert len(read_pod_config(written["pod.json"])) == len(pods)


@pytest.mark.parametrize(
    ("strategy", "pods", "why"),
    [
        # lsClass 60 % + beClass 50 % of egress = 1.1G: refused whatever the pods ask; L1's max is lsClass's
        # 600M / 8 (not the 700M the two LS pods' requests raise the tc class to: 87,500,000 B/s), L2's 500M / 8
        (
            {
                "resourceQOSStrategy": {
                    "lsClass": {"networkQOS": {"enable": True, "egressLimit": 60, "ingressLimit": 60}},
                    "beClass": {"networkQOS": {"enable": True, "egressLimit": 50, "ingressLimit": 40}},
                }
            },
            pods_asking("LS", {"kubernetes.io/egress-request": "350M"}),
            [
                "(tx): L1's max (lsClass egressLimit, 75000000 B/s) plus L2's max (beClass egressLimit, 62500000 "
                "B/s) is above the node's 125000000 B/s"
            ],
        ),
        # lsrClass's and lsClass's requests (300M + 300M) above lsClass's 500M limit: L1's max is raised to its min,
        # 600M / 8 = 75,000,000 B/s (terway-qos refuses a min above its max), + beClass's 500M / 8 = 62,500,000
        (
            {
                "resourceQOSStrategy": {
                    "lsrClass": {"networkQOS": {"enable": True, "egressRequest": 30}},
                    "lsClass": {
                        "networkQOS": {"enable": True, "egressRequest": 30, "egressLimit": 50, "ingressLimit": 60}
                    },
                    "beClass": {"networkQOS": {"enable": True, "egressLimit": 50, "ingressLimit": 40}},
                }
            },
            [],
            [
                "(tx): L1's max (lsrClass and lsClass egressRequests, 75000000 B/s) plus L2's max (beClass "
                "egressLimit, 62500000 B/s) is above the node's 125000000 B/s"
            ],
        ),
        # lsClass's absolute 2G ingress limit on a 1G node: 250,000,000 B/s; beClass's "0" is HTB's smallest rate,
        # 8,000 bits/s = 1,000 B/s
        (
            {
                "resourceQOSStrategy": {
                    "lsClass": {"networkQOS": {"enable": True, "egressLimit": 60, "ingressLimit": "2G"}},
                    "beClass": {"networkQOS": {"enable": True, "egressLimit": 40, "ingressLimit": "0"}},
                }
            },
            [],
            [
                "(rx): L1's max (lsClass ingressLimit, 250000000 B/s) is above the node's 125000000 B/s",
                "(rx): L1's max (lsClass ingressLimit, 250000000 B/s) plus L2's max (beClass ingressLimit, 1000 B/s) "
                "is above the node's 125000000 B/s",
            ],
        ),
    ],
    ids=["limits-above-the-total", "requests-above-ls-limit", "limit-above-the-node"],
)
def test_a_refusal_names_what_each_max_is_made_of(strategy: dict[str, Any], pods: list[Pod], why: list[str]) -> None:
    plan = plan_for(strategy, pods)
    assert refusals(plan) == [f"terway-qos would refuse global_bps_config {reason}" for reason in why]
    with pytest.raises(Refused):  # and terway-qos would: the numbers named are those of the file
        read_global_config(global_bps_config(plan))


def test_the_file_with_lsclass_limit_as_l1_max_is_refused_too() -> None:
    """The second case above cannot be written any other way: with lsClass's 500M (62,500,000 B/s) as L1's max,
    L1's min (75,000,000 B/s) is above it, which terway-qos refuses as well."""
    with pytest.raises(Refused, match="egress config is not valid"):
        read_global_config(
            "hw_tx_bps_max 125000000\nhw_rx_bps_max 125000000\n"
            "offline_l1_tx_bps_min 75000000\noffline_l1_tx_bps_max 62500000\n"
            "offline_l2_tx_bps_max 62500000\n"
        )


requests = st.sampled_from(["0", "100M", "350M", "700M", "1G", "3G"])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["SYSTEM", "LSR", "LS", "BE"]),
            st.fixed_dictionaries(
                {},
                optional={
                    f"kubernetes.io/{direction}-{kind}": requests
                    for direction in ("egress", "ingress")
                    for kind in ("request", "bandwidth")
                },
            ),
        ),
        max_size=6,
    )
)
def test_the_levels_are_the_nodeslos_alone_whatever_the_pods_ask(pods: list[tuple[str, dict[str, str]]]) -> None:
    bound = [with_uid(make_pod(f"p{i}", label, asked, ip=f"10.0.2.{i}")) for i, (label, asked) in enumerate(pods)]
    plan = plan_for(FITS, bound)
    assert refusals(plan) == []
    assert config_lines(global_bps_config(plan)) == FITS_LEVELS


limits = st.one_of(st.integers(0, 100), st.sampled_from(["0", "100M", "300M", "700M", "1G"]))


@settings(max_examples=200, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            klass: st.fixed_dictionaries(
                {"enable": st.just(True)},
                optional={key: limits for key in ("egressRequest", "egressLimit", "ingressRequest", "ingressLimit")},
            )
            for klass in ("lsrClass", "lsClass", "beClass")
        }
    )
)
def test_what_is_written_terway_qos_accepts_and_what_it_would_refuse_is_reported(strategy: dict[str, Any]) -> None:
    spec = {"resourceQOSStrategy": {klass: {"networkQOS": qos} for klass, qos in strategy.items()}}
    plan = plan_for(spec, [])
    written, problems = terway_files(plan, SYSTEMD)
    if not plan.directions:  # a NodeSLO no backend can shape (requests above the total)
        assert written == {}
        return
    try:
        read_global_config(global_bps_config(plan))
        accepted = True
    except Refused:
        accepted = False
    assert accepted == (not refusals(plan))
    if accepted:
        assert read_global_config(written["global_bps_config"])
    else:
        assert written == {} and problems


def test_koordlets_test_vector_and_its_percentage_defect() -> None:
    """koordlet's own vector (total 100M, LS "10M", BE "20M" → HwRx 12,500,000, L1 tx 1,250,000) holds; a
    percentage of 10 % is the same 1,250,000 bytes/s here, where koordlet writes 10,000,000 (10 % of the bits)."""
    strings = {
        "resourceQOSStrategy": {
            "lsClass": {"networkQOS": {"enable": True, "egressRequest": "10M", "ingressRequest": "10M"}},
            "beClass": {"networkQOS": {"enable": True, "egressRequest": "20M", "ingressRequest": "20M"}},
        }
    }
    lines = config_lines(global_bps_config(plan_for(strings, [], total="100M")))
    assert lines["hw_rx_bps_max"] == 12_500_000
    assert lines["offline_l1_tx_bps_min"] == 1_250_000
    assert lines["offline_l2_tx_bps_min"] == 2_500_000
    percent = {"resourceQOSStrategy": {"lsClass": {"networkQOS": {"enable": True, "egressRequest": 10}}}}
    assert config_lines(global_bps_config(plan_for(percent, [], total="100M")))["offline_l1_tx_bps_min"] == 1_250_000


def test_lsr_shares_l1_with_ls_its_request_added() -> None:
    both = {
        "resourceQOSStrategy": {
            "lsrClass": {"networkQOS": {"enable": True, "egressRequest": 10}},
            "lsClass": {"networkQOS": {"enable": True, "egressRequest": 30, "egressLimit": 80}},
        }
    }
    lines = config_lines(global_bps_config(plan_for(both, [])))
    assert lines["offline_l1_tx_bps_min"] == 50_000_000  # (100M + 300M) / 8
    assert lines["offline_l1_tx_bps_max"] == 100_000_000  # lsClass's 80 %, not lsr's 100 %


@pytest.mark.parametrize(
    ("driver", "qos", "expected"),
    [
        ("systemd", "Burstable", "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b_3c.slice"),
        ("systemd", "BestEffort", "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1a2b_3c.slice"),
        ("systemd", "Guaranteed", "kubepods.slice/kubepods-pod1a2b_3c.slice"),
        ("cgroupfs", "Burstable", "kubepods/burstable/pod1a2b-3c"),
        ("cgroupfs", "BestEffort", "kubepods/besteffort/pod1a2b-3c"),
        ("cgroupfs", "Guaranteed", "kubepods/pod1a2b-3c"),
    ],
)
def test_the_cgroup_directory_is_where_the_kubelet_puts_the_pod(driver: str, qos: str, expected: str) -> None:
    """The kubelet's layouts (its cgroup drivers), which terway-qos walks too (pkg/config/config.go: kubepods.slice
    with kubepods-{burstable,besteffort}.slice, or kubepods with burstable/besteffort; Guaranteed at the top)."""
    layout = CgroupLayout(driver, "/sys/fs/cgroup/net_cls")
    assert pod_cgroup_dir("1a2b-3c", qos, layout) == f"/sys/fs/cgroup/net_cls/{expected}"


def test_pod_json_is_the_object_keyed_by_uid_that_terway_qos_parses() -> None:
    pods = [
        make_pod("web", "LS", ip="10.0.0.2", qos="Burstable"),
        make_pod("batch", "BE", {"kubernetes.io/egress-bandwidth": "30M"}, ip="10.0.0.3", qos="BestEffort"),
        make_pod("dns", "SYSTEM", {"kubernetes.io/ingress-bandwidth": "8M"}, ip="10.0.0.4", qos="Guaranteed"),
        make_pod("db", "LSR", ip="10.0.0.5", qos="Burstable"),
        make_pod("plain", qos="BestEffort", ip="10.0.0.6"),
        make_pod("host", "LS", host_network=True),  # the node's own address: not listed
    ]
    plan = plan_for(STRATEGY, [with_uid(p) for p in pods])
    text, problems = pod_config(plan, SYSTEMD)
    assert problems == []
    assert list(json.loads(text)) == ["uid-batch", "uid-db", "uid-dns", "uid-plain", "uid-web"]  # pod key order
    read = read_pod_config(text)
    root = "/sys/fs/cgroup/net_cls/kubepods.slice"
    assert {
        uid: (e.pod_name, e.pod_namespace, e.pod_uid, applied_priority(e), e.cgroup_dir, e.qos)
        for uid, e in read.items()
    } == {
        "uid-batch": (
            "batch",
            "ns",
            "uid-batch",
            2,
            f"{root}/kubepods-besteffort.slice/kubepods-besteffort-poduid_batch.slice",
            {"ingressBandwidth": 0, "egressBandwidth": 3_750_000},  # 30 Mbit/s
        ),
        "uid-db": (
            "db",
            "ns",
            "uid-db",
            1,
            f"{root}/kubepods-burstable.slice/kubepods-burstable-poduid_db.slice",
            {"ingressBandwidth": 0, "egressBandwidth": 0},
        ),
        "uid-dns": (
            "dns",
            "ns",
            "uid-dns",
            0,
            f"{root}/kubepods-poduid_dns.slice",
            {"ingressBandwidth": 1_000_000, "egressBandwidth": 0},  # 8 Mbit/s
        ),
        "uid-plain": (
            "plain",
            "ns",
            "uid-plain",
            2,
            f"{root}/kubepods-besteffort.slice/kubepods-besteffort-poduid_plain.slice",
            {"ingressBandwidth": 0, "egressBandwidth": 0},
        ),
        "uid-web": (
            "web",
            "ns",
            "uid-web",
            1,
            f"{root}/kubepods-burstable.slice/kubepods-burstable-poduid_web.slice",
            {"ingressBandwidth": 0, "egressBandwidth": 0},
        ),
    }


def test_an_array_is_what_terway_qos_refuses() -> None:
    """The shape the backend wrote before (an unmerged draft's ``[]Pod``) is refused by the released parser."""
    with pytest.raises(Refused, match="cannot unmarshal list into Go value of type map"):
        read_pod_config('[{"podName": "web", "podUID": "u"}]')


def test_a_pod_without_a_uid_is_left_out_and_reported() -> None:
    plan = plan_for(STRATEGY, [make_pod("web", "LS", ip="10.0.0.2")])
    text, problems = pod_config(plan, SYSTEMD)
    assert json.loads(text) == {}
    assert problems == ["pod ns/web has no metadata.uid: not in terway-qos's pod.json"]


def test_the_backend_writes_on_change_only_and_atomically(tmp_path: Path) -> None:
    web = with_uid(make_pod("web", "LS", ip="10.0.0.2"))
    backend = TerwayBackend(tmp_path / "qos")  # made when missing
    first = backend.enforce(lambda _: plan_for(STRATEGY, [web]), dry_run=False)
    assert (first.operations, first.applied, first.problems) == (2, True, [])
    written = files(tmp_path / "qos")
    assert sorted(written) == ["global_bps_config", "pod.json"]  # no staging file left behind
    again = backend.enforce(lambda _: plan_for(STRATEGY, [web]), dry_run=False)
    assert again.operations == 0 and files(tmp_path / "qos") == written
    # a new pod rewrites pod.json alone; a NodeSLO change global_bps_config alone
    batch = with_uid(make_pod("batch", "BE", ip="10.0.0.3"))
    assert backend.enforce(lambda _: plan_for(STRATEGY, [web, batch]), dry_run=False).operations == 1
    assert len(read_pod_config((tmp_path / "qos" / "pod.json").read_text())) == 2
    other = copy.deepcopy(STRATEGY)
    other["resourceQOSStrategy"]["lsClass"]["networkQOS"]["egressRequest"] = 20
    assert backend.enforce(lambda _: plan_for(other, [web, batch]), dry_run=False).operations == 1
    assert config_lines((tmp_path / "qos" / "global_bps_config").read_text())["offline_l1_tx_bps_min"] == 25_000_000


def test_an_impossible_nodeslo_keeps_the_last_good_files_and_dry_run_writes_nothing(tmp_path: Path) -> None:
    backend = TerwayBackend(tmp_path)
    backend.enforce(lambda _: plan_for(STRATEGY, []), dry_run=False)
    good = files(tmp_path)
    over = {"resourceQOSStrategy": {"lsClass": {"networkQOS": {"enable": True, "egressRequest": "2G"}}}}
    result = backend.enforce(lambda _: plan_for(over, []), dry_run=False)
    assert result.operations == 0 and not result.applied
    assert any("invalid NodeSLO n1" in p for p in result.problems), result.problems
    assert files(tmp_path) == good
    other = copy.deepcopy(STRATEGY)
    other["resourceQOSStrategy"]["lsClass"]["networkQOS"]["egressRequest"] = 20
    dry = backend.enforce(lambda _: plan_for(other, []), dry_run=True)
    assert dry.operations == 0 and dry.problems == []
    assert files(tmp_path) == good


def test_an_unwritable_directory_is_a_problem_naming_it_and_cleanup_removes_the_files(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    result = TerwayBackend(blocked).enforce(lambda _: plan_for(STRATEGY, []), dry_run=False)
    assert not result.applied
    assert result.problems == [f"terway-qos: cannot write {blocked}: File exists"]
    backend = TerwayBackend(tmp_path / "qos")
    backend.enforce(lambda _: plan_for(STRATEGY, []), dry_run=False)
    (tmp_path / "qos" / "other").write_text("terway's own")
    assert backend.cleanup() == [f"file {tmp_path}/qos/global_bps_config", f"file {tmp_path}/qos/pod.json"]
    assert files(tmp_path / "qos") == {"other": "terway's own"}
    assert backend.cleanup() == []
