"""The netaware CLI: reconcile on the example cluster, one-line errors, declared subcommands."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from operators import __version__
from operators.cli.main import cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = str(ROOT / "hack" / "examples")
NOW = "2026-11-22T12:00:00Z"
KOORD_BANDWIDTH = "node.koordinator.sh/network-bandwidth"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_version_and_help() -> None:
    code, out, _ = run("--version")
    assert code == 0 and __version__ in out
    code, out, _ = run("--help")
    assert code == 0
    commands = (
        "reconcile",
        "schedule",
        "deschedule",
        "simulate",
        "topology",
        "run",
        "webhook",
        "extender",
        "probe",
        "demo",
    )
    for command in commands:
        assert command in out


def test_schedule_help_says_which_plugins_run() -> None:
    code, out, _ = run("schedule", "--help")
    assert code == 0
    flat = " ".join(out.split())
    assert "kube-scheduler's default filters run first, in its order and words" in flat
    assert "PodTopologySpread's and InterPodAffinity's are added" in flat


def test_reconcile_prints_a_list_of_the_controllers_objects() -> None:
    code, out, err = run("reconcile", "-f", EXAMPLES, "-o", "yaml", "--now", NOW)
    assert code == 0, err
    listing = yaml.safe_load(out)
    assert listing["apiVersion"] == "v1" and listing["kind"] == "List"
    kinds = sorted({(item["kind"], item["metadata"]["name"]) for item in listing["items"]})
    assert kinds == [
        ("AppGroup", "a1"),
        ("AppGroup", "onlineboutique"),
        ("NetworkTopology", "net-topology-test"),
        *(("NodeSLO", f"n-{i}") for i in range(1, 9)),
    ]
    east = next(item for item in listing["items"] if item["kind"] == "NodeSLO" and item["metadata"]["name"] == "n-6")
    assert east["status"]["networkQOS"]["classes"]["be"]["ingressRequest"] == "500M"  # east node strategy: 5 % of 10G
    a1 = next(item for item in listing["items"] if item["metadata"]["name"] == "a1")
    assert a1["status"]["runningWorkloads"] == 2
    assert [(entry["workload"]["selector"], entry["index"]) for entry in a1["status"]["topologyOrder"]] == [
        ("p1", 1),
        ("p2", 2),
        ("p3", 3),
    ]
    assert a1["status"]["topologyCalculationTime"] == NOW
    assert a1["status"]["conditions"][0]["reason"] == "TopologyComputed"
    topology = next(item for item in listing["items"] if item["kind"] == "NetworkTopology")
    assert [weight["name"] for weight in topology["spec"]["weights"]] == ["UserDefined", "NetperfCosts"]
    assert topology["status"]["nodeCount"] == 8 and topology["status"]["weightCalculationTime"] == NOW
    boutique = next(item for item in listing["items"] if item["metadata"]["name"] == "onlineboutique")
    assert len(boutique["status"]["topologyOrder"]) == 11
    assert a1["spec"] == yaml.safe_load((ROOT / "hack/examples/appgroup-a1.yaml").read_text())["spec"]


def test_reconcile_is_deterministic_and_speaks_json() -> None:
    first = run("reconcile", "-f", EXAMPLES, "-o", "json", "--now", NOW)
    second = run("reconcile", "-f", EXAMPLES, "-o", "json", "--now", NOW)
    assert first == second
    assert json.loads(first[1])["kind"] == "List"


def test_reconcile_table() -> None:
    code, out, _ = run("reconcile", "-f", EXAMPLES, "-o", "table")
    assert code == 0
    lines = [line.split() for line in out.splitlines()]
    assert out.splitlines()[0].startswith("AppGroups: topology order")
    assert lines[1] == ["APPGROUP", "ALGORITHM", "ORDER", "RUNNING", "READY"]
    # a1: p1 depends on p2, p2 on p3 (KahnSort: a workload before those it depends on); 2 of its pods run
    assert ["default/a1", "KahnSort", "p1", "->", "p2", "->", "p3", "2", "True"] in lines
    assert ["default/net-topology-test", "8", "0", "True"] in lines
    assert ["n-5", "10G", "bits/s", "node.koordinator.sh/network-bandwidth", "lsr,", "ls,", "be,", "system"] in lines


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "missing.yaml: no such file or directory"),
        ("kind: [", "not valid YAML"),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: a}\nstatus: {capacity: {cpu: 10Q}}\n",
            "document 1: status.capacity.cpu: not a quantity",
        ),
    ],
)
def test_bad_input_is_one_line_naming_file_and_field(
    tmp_path: pathlib.Path, content: str | None, expected: str
) -> None:
    target = tmp_path / "missing.yaml"
    if content is not None:
        target = tmp_path / "bad.yaml"
        target.write_text(content)
    code, out, err = run("reconcile", "-f", str(target))
    assert code == 1
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("error: ") and expected in err and target.name in err


def test_bad_now_is_a_usage_error() -> None:
    code, _, err = run("reconcile", "-f", EXAMPLES, "--now", "yesterday")
    assert code == 2 and "RFC 3339" in err


def test_console_script_is_installed() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "operators.cli", "--version"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and __version__ in result.stdout


def test_webhook_requires_tls_unless_insecure() -> None:
    code, _, err = run("webhook")
    assert code == 2 and "--tls-cert-file and --tls-private-key-file are required" in err


def test_deschedule_prints_the_engines_plan(tmp_path: pathlib.Path) -> None:
    from operators.api.config.descheduler import parse_policy
    from operators.engine.cluster.snapshot import build_snapshot
    from operators.engine.descheduling.lownodeload import plan
    from tests.support.lownodeload import NOW as PLAN_NOW
    from tests.support.lownodeload import hot_cluster

    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(hot_cluster()))
    document = yaml.safe_load((ROOT / "hack" / "configs" / "descheduler-policy.yaml").read_text())
    args = document["profiles"][0]["pluginConfig"][0]["args"]
    args.update(accountingMode="combined", anomalyCondition={"consecutiveAbnormalities": 1})
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(document))
    code, out, _ = run(
        "deschedule",
        "-f",
        str(tmp_path / "cluster.yaml"),
        "--policy",
        str(tmp_path / "policy.yaml"),
        "--now",
        PLAN_NOW.isoformat(),
    )
    assert code == 0
    printed = json.loads(out)
    assert printed == plan(build_snapshot(hot_cluster()), parse_policy(document), PLAN_NOW).to_json()
    assert printed["nodes"]["n0"]["class"] == "high" and len(printed["evictions"]) == 5  # PerNamespace limit
    assert set(printed["evictions"][0]) == {"pod", "node", "target", "reason"}


def test_deschedule_prints_the_rebalancers_moves_with_their_gains(tmp_path: pathlib.Path) -> None:
    """front -> back split across two zones (10 a pair): the rebalancer's one move puts them on one node, gain 10."""
    from tests.support.rebalancing import NS, TOPOLOGY, appgroup, node, pod, topology

    cluster = [node("a1", "za"), node("b1", "zb", cpu="100m"), topology(["za", "zb"]),
               appgroup("app", {"front": ["back"], "back": []}), pod("front-0", "a1", "front", "app"),
               pod("back-0", "b1", "back", "app")]  # fmt: skip
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(cluster))
    document = yaml.safe_load((ROOT / "hack" / "configs" / "descheduler-rebalance-policy.yaml").read_text())
    document["profiles"][0]["pluginConfig"][1]["args"]["weights"]["bandwidthBalance"] = 0
    # b1 is full (its cpu): LowNodeLoad would evict back-0 first and the rebalancer wait for that; not here
    document["profiles"][0]["pluginConfig"][0]["args"]["highThresholds"] = {"netBandwidth": 100, "cpu": 100}
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(document))
    config = yaml.safe_load((ROOT / "hack" / "configs" / "scheduler-config.yaml").read_text())
    config["profiles"][0]["pluginConfig"][0]["args"].update(namespaces=[NS], networkTopologyName=TOPOLOGY)
    (tmp_path / "scheduler.yaml").write_text(yaml.safe_dump(config))
    code, out, err = run("deschedule", "-f", str(tmp_path / "cluster.yaml"), "--policy", str(tmp_path / "policy.yaml"),
                         "--config", str(tmp_path / "scheduler.yaml"))  # fmt: skip
    assert code == 0, err
    rebalance = json.loads(out)["rebalance"]
    assert [(m["pod"], m["from"], m["to"], m["gain"], m["cost"]) for m in rebalance["moves"]] == [
        (f"{NS}/back-0", "b1", "a1", 10, {"before": 10, "after": 0})
    ]
    assert rebalance["appGroups"] == {f"{NS}/app": {"costBefore": 10, "costAfter": 0, "planned": 0}}


def test_deschedule_bad_policy_is_one_line_naming_the_field(tmp_path: pathlib.Path) -> None:
    document = yaml.safe_load((ROOT / "hack" / "configs" / "descheduler-policy.yaml").read_text())
    document["profiles"][0]["pluginConfig"][0]["args"]["lowThresholds"]["cpu"] = 90
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(document))
    code, out, err = run("deschedule", "-f", EXAMPLES, "--policy", str(tmp_path / "policy.yaml"))
    assert code == 1 and out == ""
    assert err.strip() == (
        f"error: {tmp_path / 'policy.yaml'}: profiles[0].pluginConfig[0].args.lowThresholds.cpu: "
        "above highThresholds.cpu (80) (got 90)"
    )


def test_simulate_json_is_reproducible_and_plots(tmp_path: pathlib.Path) -> None:
    args = ("simulate", "--scenario", "thesis-1", "--nodes", "20", "--pods", "150", "--accounting", "combined")
    code, out, _ = run(*args, "-o", "json", "--rebalance", "--plot", str(tmp_path / "u.png"))
    assert code == 0
    document = json.loads(out)
    assert (document["scenario"], document["seed"], document["accounting"]) == ("thesis-1", 1, "combined")
    aware, default = document["results"]["network-aware"], document["results"]["default"]
    assert (aware["scheduled"], aware["pending"], aware["overcommittedNodes"]) == (100, 50, 0)  # 5 per node
    assert default["scheduled"] == 150 and default["overcommittedNodes"] > 0
    assert set(aware) >= {"utilization", "objective", "seconds", "podsPerSecond", "rebalance"}
    assert aware["rebalance"]["objectiveAfter"] <= aware["rebalance"]["objectiveBefore"]
    assert (tmp_path / "u.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = json.loads(run(*args, "-o", "json", "--rebalance")[1])
    for name in ("default", "network-aware"):
        for result in (document["results"][name], again["results"][name]):
            del result["seconds"], result["podsPerSecond"], result["rebalance"]["seconds"]
    assert again == document


def test_simulate_from_a_snapshot() -> None:
    code, out, _ = run("simulate", "-f", EXAMPLES, "--pods", "30", "-o", "json")
    assert code == 0
    results = json.loads(out)["results"]
    assert results["network-aware"]["scheduled"] + results["network-aware"]["pending"] == 30


@pytest.mark.parametrize(
    "command",
    [
        ["webhook", "--insecure"],
        ["extender", "--insecure"],
        ["run", "--no-leader-elect"],
        ["probe", "--node-name", "n", "--topology", "nt", "--namespace", "default", "--health-port", "0"],
    ],
)
def test_no_credentials_is_one_line_naming_what_to_pass(tmp_path: pathlib.Path, command: list[str]) -> None:
    import os
    import subprocess
    import sys

    env = {key: value for key, value in os.environ.items() if key not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(tmp_path)  # no ~/.kube/config
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "operators.cli",
            *command,
            "--port" if command[0] != "run" else "--health-port",
            "0" if command[0] == "run" else "18931",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert errors[0].startswith("error: no cluster credentials:")
    assert "pass --kubeconfig PATH or --server URL" in errors[0]
    assert ("-f PATH" in errors[0]) == (command[0] in ("webhook", "extender"))  # only where -f exists


def test_insecure_listens_on_loopback_unless_told_otherwise(tmp_path: pathlib.Path) -> None:
    import subprocess
    import sys
    import time

    process = subprocess.Popen(
        [sys.executable, "-m", "operators.cli", "extender", "--insecure", "--port", "18932", "-f", str(EXAMPLES)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        lines: list[str] = []
        while time.monotonic() < deadline and process.stderr is not None:
            line = process.stderr.readline()
            lines.append(line)
            if "listening on" in line:
                break
        assert any("listening on http://127.0.0.1:18932" in line for line in lines), lines
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_simulate_an_appgroup_scenario_with_and_without_ordering() -> None:
    code, out, _ = run("simulate", "--scenario", "boutique", "--replicas", "2", "--runs", "2", "-o", "json")
    assert code == 0
    document = json.loads(out)
    assert (document["scenario"], document["pods"], document["runs"]) == ("boutique", 22, 2)
    assert list(document["results"]) == ["arrival", "topologyOrder", "gates", "plan"]
    # Online Boutique's 15 dependencies (frontend 7, checkout 6, cart 1, recommendation 1), 2 x 2 pairs each
    assert {result["edgePairs"] for result in document["results"].values()} == {60}
    assert run("simulate", "--scenario", "boutique", "--replicas", "2", "--runs", "2", "-o", "json")[1] == out
    code, _, err = run("simulate", "--scenario", "random-dag", "--rebalance")
    assert code == 2 and "--rebalance: not for the AppGroup scenario random-dag" in err


def test_topology_shows_the_costs_the_controller_computes_and_plots(tmp_path: pathlib.Path) -> None:
    code, out, _ = run("topology", "-f", EXAMPLES, "-o", "json", "--plot", str(tmp_path / "t.png"))
    assert code == 0
    document = json.loads(out)
    assert (document["topology"], document["weights"]) == ("default/net-topology-test", "NetperfCosts")
    # the seeds' ConfigMap: 8 nodes, every ordered pair but the self-pairs measured
    assert document["nodePairsMeasured"] == 8 * 7
    assert set(document["costs"]) == {"topology.kubernetes.io/region", "topology.kubernetes.io/zone"}
    assert set(document["costs"]["topology.kubernetes.io/zone"]) == {"Z1", "Z2", "Z3", "Z4"}
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, _ = run("topology", "-f", EXAMPLES, "--weights", "UserDefined", "-o", "table")
    rows = [line.split() for line in out.splitlines()]
    assert code == 0 and ["zone", "Z3", "Z4", "10"] in rows  # the seeds' UserDefined Z3<->Z4: 10
    code, _, err = run("topology", "-f", EXAMPLES, "--name", "other")
    assert code == 1 and err.strip() == f"error: {EXAMPLES}: expected --name other; found: default/net-topology-test"


def test_explain_pod_from_a_snapshot_agrees_with_schedule() -> None:
    pod = str(ROOT / "hack" / "pod-p1.yaml")
    config = str(ROOT / "hack" / "configs" / "scheduler-config.yaml")
    code, out, err = run("schedule", "-f", EXAMPLES, "--pod", pod, "--config", config, "-o", "json")
    assert code == 0, err
    scheduled = json.loads(out)
    code, out, err = run(
        "explain",
        "pod",
        "default/p1-deployment-6b7c8d-xyz12",
        "-f",
        EXAMPLES,
        "-f",
        pod,
        "--config",
        config,
        "-o",
        "json",
    )
    assert code == 0, err
    explained = json.loads(out)
    assert explained.pop("whyNot") == []
    assert explained.pop("unavailable") == ""  # a node fits: no FailedScheduling message
    assert explained == scheduled
    code, out, _ = run("explain", "pod", "p1-deployment-6b7c8d-xyz12", "-f", EXAMPLES, "-f", pod, "--config", config)
    assert code == 0
    assert out.splitlines()[0] == f"pod default/p1-deployment-6b7c8d-xyz12: {scheduled['selectedNode']} (*)"
    code, _, err = run("explain", "pod", "default/nope", "-f", EXAMPLES)
    assert code == 1 and err.strip() == "error: pod default/nope not found"


def test_explain_appgroup_and_node_from_a_snapshot() -> None:
    config = str(ROOT / "hack" / "configs" / "scheduler-config.yaml")
    code, out, err = run("explain", "appgroup", "default/a1", "-f", EXAMPLES, "--config", config, "-o", "json")
    assert code == 0, err
    document = json.loads(out)
    # p2 runs on n-1 (Z1), p3 on n-4 (Z2): the seeds' topology costs Z1 <-> Z2 5, within p2 -> p3's limit of 20
    assert document["edges"] == [
        {"workload": "p2", "dependency": "p3", "maxNetworkCost": 20, "pairs": 1, "meanCost": 5.0, "worstCost": 5,
         "pairsOverMaxNetworkCost": 0}
    ]  # fmt: skip
    assert document["placements"]["p2"] == [{"pod": "default/p2-deployment-7d4b9c-abcde", "node": "n-1", "zone": "Z1"}]
    code, out, err = run("explain", "node", "n-1", "-f", EXAMPLES, "-o", "json")
    assert code == 0, err
    node = json.loads(out)
    # n-1: 1G from Koordinator's annotation; p2's pod there asks 300M each way (its limits, no requests)
    assert node["capacity"] == {"bitsPerSecond": 10**9, "source": "node.koordinator.sh/network-bandwidth"}
    assert node["requested"] == {"ingress": 300_000_000, "egress": 300_000_000}
    assert node["free"] == {"ingress": 700_000_000, "egress": 700_000_000}
    assert node["descheduler"]["class"] == "low"  # 30 % used: at the default low threshold of 30 %
    code, _, err = run("explain", "node", "nope", "-f", EXAMPLES)
    assert code == 1 and err.strip() == "error: node nope not found"


def test_explain_node_shows_what_kube_scheduler_accounts_beside_the_engine(tmp_path: pathlib.Path) -> None:
    """A node advertising 900M egress (1G less a 100M pod without resources) with a 300M pod that requests the
    resource: kube-scheduler's free room (900M - 300M) is the engine's (1G - 100M - 300M)."""
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(
        """apiVersion: v1
kind: Node
metadata: {name: n1, annotations: {node.kubernetes.io/network-limit: 1G}}
status: {allocatable: {netaware.io/egress-bandwidth: 900M, netaware.io/ingress-bandwidth: 1G}}
---
apiVersion: v1
kind: Pod
metadata: {name: old, namespace: d, annotations: {kubernetes.io/egress-bandwidth: 100M}}
spec: {nodeName: n1, containers: [{name: c}]}
---
apiVersion: v1
kind: Pod
metadata: {name: new, namespace: d, annotations: {kubernetes.io/egress-bandwidth: 999M}}
spec:
  nodeName: n1
  containers: [{name: c, resources: {requests: {netaware.io/egress-bandwidth: 300M}}}]
"""
    )
    code, out, err = run("explain", "node", "n1", "-f", str(snapshot), "-o", "json")
    assert code == 0, err
    document = json.loads(out)
    # the pod's resource (300M) is counted, not its annotation (999M): kube-scheduler counts the resource
    assert document["requested"] == {"ingress": 0, "egress": 400_000_000}
    assert document["free"]["egress"] == 600_000_000
    egress = document["extendedResources"]["netaware.io/egress-bandwidth"]
    assert egress == {"allocatable": 900_000_000, "requested": 300_000_000}


def test_agent_terway_backend_writes_the_files_once_from_a_snapshot(tmp_path: pathlib.Path) -> None:
    """`netaware agent --backend terway-qos -f SNAPSHOT --once`: the two files, bytes/s; again: nothing written;
    --dry-run prints them; --cleanup removes them (the interface is only looked up: loopback)."""
    snapshot = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "annotations": {KOORD_BANDWIDTH: "80M"}}},
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeSLO",
            "metadata": {"name": "n1"},
            "spec": {
                "resourceQOSStrategy": {
                    name: {"networkQOS": {"enable": True, "egressLimit": 50, "ingressLimit": 50}}
                    for name in ("lsClass", "beClass")
                }
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "batch", "namespace": "ns", "uid": "u1", "labels": {"koordinator.sh/qosClass": "BE"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.3"},
        },
    ]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(snapshot))
    qos = tmp_path / "qos"
    common = ("agent", "--backend", "terway-qos", "--terway-qos-dir", str(qos), "--interface", "lo")
    once = (*common, "--node-name", "n1", "-f", str(tmp_path / "cluster.yaml"), "--once")
    code, out, err = run(*once)
    assert code == 0, err
    assert json.loads(out) == {"node": "n1", "interface": "lo", "operations": 2, "applied": True, "problems": []}
    config = (qos / "global_bps_config").read_text()
    assert "hw_tx_bps_max 10000000\n" in config and "offline_l2_tx_bps_max 5000000\n" in config  # 80M, 40M
    assert json.loads((qos / "pod.json").read_text())["u1"]["podUID"] == "u1"
    assert json.loads(run(*once)[1])["operations"] == 0
    code, out, _ = run(*once[:-1], "--dry-run")
    assert code == 0 and json.loads(out)["files"]["global_bps_config"] == config
    # a NodeSLO terway-qos would refuse (ls 50 % + be 100 % of ingress): --dry-run says why, --once writes nothing
    snapshot[1]["spec"]["resourceQOSStrategy"]["beClass"]["networkQOS"].pop("ingressLimit")
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(snapshot))
    code, out, _ = run(*once[:-1], "--dry-run")
    assert code == 0 and json.loads(out)["files"] == {}
    assert "NodeSLO n1 cannot be expressed for terway-qos" in json.loads(out)["problems"][0]
    code, out, _ = run(*once)
    assert json.loads(out)["operations"] == 0 and (qos / "global_bps_config").read_text() == config
    code, out, _ = run(*common, "--cleanup")
    assert code == 0 and json.loads(out)["removed"] == [f"file {qos}/global_bps_config", f"file {qos}/pod.json"]
    assert list(qos.iterdir()) == []


def test_agent_dry_run_renders_the_nodeslo_from_the_snapshots_configuration(tmp_path: pathlib.Path) -> None:
    """`netaware agent --dry-run -f SNAPSHOT` with the slo-controller-config and no NodeSLO plans the classes of the
    NodeSLO `netaware reconcile` renders (offline = live): n-1 (west, 1G from system-config) has lsClass 30 % of
    1G = 300M requested, 80 % = 800M as limit, beClass 10 % / 50 %. Without the ConfigMap it says the node has no
    NodeSLO."""
    snapshot = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n-1", "labels": {"topology.kubernetes.io/region": "us-west-1"}},
        },
    ]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(snapshot))
    config = str(ROOT / "hack" / "examples" / "slo-controller-config.yaml")
    common = ("agent", "--interface", "lo", "--node-name", "n-1", "--dry-run", "-f", str(tmp_path / "cluster.yaml"))
    code, out, err = run(*common, "-f", config)
    assert code == 0, err
    plan = json.loads(out)
    classes = {c["name"]: c for c in plan["egress"]["classes"]}
    assert plan["egress"]["total"] == 1_000_000_000
    assert (classes["ls"]["request"], classes["ls"]["ceil"]) == (300_000_000, 800_000_000)
    assert (classes["be"]["request"], classes["be"]["ceil"]) == (100_000_000, 500_000_000)
    assert plan["problems"] == []
    reconciled = json.loads(run("reconcile", "-f", str(tmp_path / "cluster.yaml"), "-f", config, "-o", "json")[1])
    (slo,) = [item for item in reconciled["items"] if item["kind"] == "NodeSLO"]
    assert slo["status"]["networkQOS"]["classes"]["ls"]["egressRequest"] == "300M"
    code, out, _ = run(*common, "--default-node-bandwidth", "1G")
    assert code == 0
    assert json.loads(out)["problems"] == [
        "node n-1 has no NodeSLO: every class requests nothing and may use the whole total"
    ]


def test_explain_appgroup_shows_the_rebalancers_moves(tmp_path: pathlib.Path) -> None:
    from operators.api import keys
    from operators.engine.planning.layout import Rebalancing
    from tests.support.rebalancing import NS, appgroup, node, pod, topology

    move = {"pod": f"{NS}/back-0", "from": "b1", "to": "a1", "gain": 10, "cost": {"before": 10, "after": 0},
            "at": "2026-11-25T10:00:00Z"}  # fmt: skip
    written = Rebalancing({"front": {"a1": 1}, "back": {"a1": 1}}, 1_800_000_000.0, (move,)).to_annotation()
    group = appgroup("app", {"front": ["back"], "back": []}, annotations={keys.REBALANCE: written})
    cluster = [node("a1", "za"), node("b1", "zb"), topology(["za", "zb"]), group, pod("front-0", "a1", "front", "app")]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(cluster))
    code, out, err = run("explain", "appgroup", f"{NS}/app", "-f", str(tmp_path / "cluster.yaml"), "-o", "json")
    assert code == 0, err
    assert json.loads(out)["rebalance"] == {
        "layoutUntil": "2027-01-15T08:00:00Z",
        "layout": {"back": {"a1": 1}, "front": {"a1": 1}},
        "moves": [move],
    }
    code, out, _ = run("explain", "appgroup", f"{NS}/app", "-f", str(tmp_path / "cluster.yaml"))
    assert "moved by the rebalancer (its layout holds until 2027-01-15T08:00:00Z):" in out
    assert "shop/back-0" in out and "10 -> 0" in out
    group["metadata"]["annotations"][keys.REBALANCE] = "{not json"
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(cluster))
    code, out, _ = run("explain", "appgroup", f"{NS}/app", "-f", str(tmp_path / "cluster.yaml"))
    assert code == 0 and "rebalancer: annotation netaware.io/rebalance is not the rebalancer's JSON: ignored" in out
