"""The terway-qos backend: the files rendered from the plan (bytes/s, L1 = LSR + LS, L2 = BE, pod.json as the array
terway-qos parses), and the backend's writes (only on change, atomic, last good state kept, cleanup). Expected
values derived by hand: bits/s ÷ 8."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from operators.agent.terway import TerwayBackend
from operators.engine.cluster.objects import Pod
from operators.engine.enforcement.plan import node_plan
from tests.engine.test_agent_plan import STRATEGY, make_node, make_pod, slo

M = 1_000_000


def config_lines(text: str) -> dict[str, int]:
    return {key: int(value) for key, value in (line.split(" ") for line in text.splitlines())}


def plan_for(strategy: dict[str, Any], pods: list[Any], total: str = "1G") -> Any:
    return node_plan(make_node({"node.koordinator.sh/network-bandwidth": total}), slo(strategy), pods)


def with_uid(pod: Pod) -> Pod:
    raw = {**pod.raw, "metadata": {**pod.raw["metadata"], "uid": f"uid-{pod.name}"}}
    return Pod.parse(raw)


def files(tmp_path: Path) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(tmp_path.iterdir())}


def test_global_config_is_bytes_per_second_l1_is_ls_and_l2_is_be() -> None:
    from operators.engine.enforcement.terway import global_bps_config

    text = global_bps_config(plan_for(STRATEGY, []))
    assert config_lines(text) == {
        "hw_tx_bps_max": 125_000_000,  # 1 Gbit/s
        "hw_rx_bps_max": 125_000_000,
        "offline_l1_tx_bps_min": 37_500_000,  # ls egress 30 % of 1G = 300 Mbit/s
        "offline_l1_tx_bps_max": 100_000_000,  # 80 %
        "offline_l1_rx_bps_min": 25_000_000,  # ingressRequest "200M"
        "offline_l1_rx_bps_max": 125_000_000,  # no ingressLimit: 100 %
        "offline_l2_tx_bps_min": 12_500_000,  # be 10 %
        "offline_l2_tx_bps_max": 62_500_000,  # 50 %
        "offline_l2_rx_bps_min": 0,  # be asks nothing for ingress (HTB's minimum rate is not carried over)
        "offline_l2_rx_bps_max": 125_000_000,
    }
    assert text.endswith("\n") and len(text.splitlines()) == 10


def test_koordlets_test_vector_and_its_percentage_defect() -> None:
    """koordlet's own vector (total 100M, LS "10M", BE "20M" → HwRx 12,500,000, L1 tx 1,250,000) holds; a
    percentage of 10 % is the same 1,250,000 bytes/s here, where koordlet writes 10,000,000 (10 % of the bits)."""
    from operators.engine.enforcement.terway import global_bps_config

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
    from operators.engine.enforcement.terway import global_bps_config

    both = {
        "resourceQOSStrategy": {
            "lsrClass": {"networkQOS": {"enable": True, "egressRequest": 10}},
            "lsClass": {"networkQOS": {"enable": True, "egressRequest": 30, "egressLimit": 80}},
        }
    }
    lines = config_lines(global_bps_config(plan_for(both, [])))
    assert lines["offline_l1_tx_bps_min"] == 50_000_000  # (100M + 300M) / 8
    assert lines["offline_l1_tx_bps_max"] == 100_000_000  # lsClass's 80 %, not lsr's 100 %


def test_pod_json_is_an_array_with_priorities_addresses_and_own_limits_in_bytes() -> None:
    from operators.engine.enforcement.terway import pod_config

    pods = [
        make_pod("web", "LS", ip="10.0.0.2"),
        make_pod("batch", "BE", {"kubernetes.io/egress-bandwidth": "30M"}, ip="10.0.0.3"),
        make_pod("dns", "SYSTEM", {"kubernetes.io/ingress-bandwidth": "8M"}, ip="10.0.0.4"),
        make_pod("db", "LSR", ip="10.0.0.5"),
        make_pod("plain", qos="BestEffort", ip="10.0.0.6"),
        make_pod("host", "LS", host_network=True),  # the node's own address: not listed
    ]
    plan = plan_for(STRATEGY, [with_uid(p) for p in pods])
    entries = json.loads(pod_config(plan))

    def entry(name: str, prio: int, ip: str, ingress: int = 0, egress: int = 0) -> dict[str, Any]:
        return {
            "podName": name,
            "podNamespace": "ns",
            "podUID": f"uid-{name}",
            "prio": prio,
            "ipv4": ip,
            "hostNetwork": False,
            "qosConfig": {"ingressBandwidth": ingress, "egressBandwidth": egress},
        }

    assert entries == [
        entry("batch", 2, "10.0.0.3", egress=3_750_000),  # 30 Mbit/s
        entry("db", 1, "10.0.0.5"),
        entry("dns", 0, "10.0.0.4", ingress=1_000_000),  # 8 Mbit/s
        entry("plain", 2, "10.0.0.6"),
        entry("web", 1, "10.0.0.2"),
    ]


def test_the_backend_writes_on_change_only_and_atomically(tmp_path: Path) -> None:
    web = make_pod("web", "LS", ip="10.0.0.2")
    backend = TerwayBackend(tmp_path / "qos")  # made when missing
    first = backend.enforce(lambda _: plan_for(STRATEGY, [web]), dry_run=False)
    assert (first.operations, first.applied, first.problems) == (2, True, [])
    written = files(tmp_path / "qos")
    assert sorted(written) == ["global_bps_config", "pod.json"]  # no staging file left behind
    again = backend.enforce(lambda _: plan_for(STRATEGY, [web]), dry_run=False)
    assert again.operations == 0 and files(tmp_path / "qos") == written
    # a new pod rewrites pod.json alone; a NodeSLO change global_bps_config alone
    batch = make_pod("batch", "BE", ip="10.0.0.3")
    assert backend.enforce(lambda _: plan_for(STRATEGY, [web, batch]), dry_run=False).operations == 1
    assert len(json.loads((tmp_path / "qos" / "pod.json").read_text())) == 2
    other = {"resourceQOSStrategy": {"lsClass": {"networkQOS": {"enable": True, "egressRequest": 20}}}}
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
    other = {"resourceQOSStrategy": {"lsClass": {"networkQOS": {"enable": True, "egressRequest": 20}}}}
    assert backend.enforce(lambda _: plan_for(other, []), dry_run=True).operations == 0
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
