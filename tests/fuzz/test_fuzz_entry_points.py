"""Every entry point against hostile input: no traceback, no 5xx, no hang, the documented error shape.

Entry points: the quantity parser, the offline CLI (snapshot documents and config files), the webhook's
``/mutate-pods``, the extender's ``/filter``, ``/prioritize`` and ``/place-pods`` (real HTTP, served in a
thread), and the slo-controller-config parser. The seeds include every class of issue 14 (huge exponents, values
beyond int64, negative bandwidths, wrong-typed fields, deep nesting, ``items: null``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import pathlib
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import jsonpatch
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from operators.api.config.scheduler import parse_config
from operators.api.quantity import QuantityError, parse_bandwidth, parse_quantity
from operators.cli.main import cli
from operators.engine.cluster.bandwidth import Accounting
from operators.engine.cluster.objects import Node
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.status.sloconfig import ConfigState, update_config
from operators.extender.admission import AdmittedPods
from operators.extender.answers import ExtenderState
from operators.extender.server import build_app as extender_app
from tests.fuzz.strategies import (
    HOSTILE_QUANTITIES,
    bandwidth_annotations,
    json_values,
    maybe,
    nodes,
    pods,
    quantities,
)
from webhooks.server import build_app as webhook_app
from webhooks.view import ClusterView

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "hack" / "examples"
FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
# The CLI cases start a whole command each: fewer of them, over a small cluster.
FUZZ_CLI = settings(FUZZ, max_examples=40)
CASE_SECONDS = 2.0  # a bound on a hang per case, not a benchmark


def example_documents() -> list[dict[str, Any]]:
    return [d for path in sorted(EXAMPLES.glob("*.yaml")) for d in yaml.safe_load_all(path.read_text()) if d]


def small_cluster() -> list[dict[str, Any]]:
    """The example cluster's namespaces, nodes, the a1 AppGroup and its pods."""
    keep = ("cluster.yaml", "pods.yaml", "appgroup-a1.yaml", "networktopology.yaml")
    return [d for name in keep for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


# --- the quantity parser -------------------------------------------------------------------------------------


@settings(max_examples=2000, deadline=None)
@given(st.one_of(quantities, st.text(), st.integers(), json_values))
def test_quantities_parse_or_fail_with_the_field_quickly(value: Any) -> None:
    started = time.thread_time()
    for parse in (parse_quantity, parse_bandwidth):
        try:
            parse(value, "spec.x")
        except QuantityError as error:
            assert str(error).startswith("spec.x: ")
    # A bound, not a benchmark: the failure this guards against ran for minutes of CPU (1e99999999). The thread's
    # CPU time, not the wall clock: the suite's three workers on two cores once held this process off the CPU for
    # 1.2 s in a case that parses in microseconds ('then'); a second leaves room for a collector pause.
    assert time.thread_time() - started < 1.0


# --- the offline CLI ---------------------------------------------------------------------------------------------


def run_cli(tmp_path: pathlib.Path, documents: list[Any], *args: str) -> None:
    """One CLI call on a snapshot file: exit 0, or exit 1 with one line ``error: <file>...``; never a traceback."""
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    started = time.perf_counter()
    result = CliRunner().invoke(cli, [*args, "-f", str(path), "-o", "json"])
    assert time.perf_counter() - started < 10 * CASE_SECONDS
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 1), result.output
    if result.exit_code == 1:
        lines = [line for line in result.stderr.splitlines() if not line.startswith("warning:")]
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
        assert "Traceback" not in result.output


cluster_documents = st.tuples(
    st.lists(st.builds(lambda n: n, nodes(name="n-1")), min_size=0, max_size=1),
    st.lists(pods(), max_size=4),
    st.lists(json_values, max_size=1),
).map(lambda parts: [*parts[0], *parts[1], *parts[2]])


@FUZZ_CLI
@given(cluster_documents)
@example([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n-1"}, "status": "abc"}])
@example([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": {"a": 1}}}])
@example(
    [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n", "annotations": {"node.kubernetes.io/network-limit": "1e308"}},
        }
    ]
)
@example([{"apiVersion": "v1", "kind": "List", "items": None}])
@example([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"a\x85b\u2028c": None}}}])
def test_offline_commands_answer_or_name_the_field(
    tmp_path_factory: pytest.TempPathFactory, documents: list[Any]
) -> None:
    tmp_path = tmp_path_factory.mktemp("cli")
    everything = [*small_cluster(), *documents]
    run_cli(tmp_path, everything, "reconcile")
    run_cli(tmp_path, everything, "deschedule")
    rebalancing = ROOT / "hack" / "configs" / "descheduler-rebalance-policy.yaml"
    run_cli(tmp_path, everything, "deschedule", "--policy", str(rebalancing))
    run_cli(tmp_path, everything, "schedule", "--pod", str(ROOT / "hack" / "pod-p1.yaml"))
    run_cli(tmp_path, everything, "topology")
    run_cli(tmp_path, everything, "explain", "pod", "default/p2-deployment-7d4b9c-abcde")
    run_cli(tmp_path, everything, "explain", "appgroup", "default/a1")
    run_cli(tmp_path, everything, "explain", "node", "n-1")
    run_cli(tmp_path, everything, "plan", "--appgroup", "default/a1", "--budget-ms", "20")
    run_cli(tmp_path, everything, "cleanup", "--scheduler-name", "s", "--reschedule-pending")


def test_deeply_nested_documents_are_one_line(tmp_path: pathlib.Path) -> None:
    for name, text in (
        ("deep.json", "[" * 100_000),
        ("deep.yaml", "a: " + "[" * 20_000),
        ("big.yaml", "a: " + "9" * 5000),
    ):
        (tmp_path / name).write_text(text)
        result = CliRunner().invoke(cli, ["reconcile", "-f", str(tmp_path / name)])
        assert result.exit_code == 1
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert result.stderr.startswith(f"error: {tmp_path / name}: ")


config_documents = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {
            "apiVersion": maybe(st.just("kubescheduler.config.k8s.io/v1")),
            "kind": maybe(st.sampled_from(["KubeSchedulerConfiguration", "DeschedulerConfiguration", "Pod"])),
            "profiles": maybe(
                st.lists(
                    st.fixed_dictionaries(
                        {
                            "plugins": maybe(
                                st.fixed_dictionaries(
                                    {
                                        "multiPoint": maybe(
                                            st.fixed_dictionaries(
                                                {
                                                    "enabled": maybe(
                                                        st.lists(
                                                            st.fixed_dictionaries(
                                                                {
                                                                    "name": st.sampled_from(
                                                                        ["NetworkOverhead", "NetworkBandwidth", "X"]
                                                                    ),
                                                                    "weight": maybe(st.integers(-5, 200)),
                                                                }
                                                            ),
                                                            max_size=3,
                                                        )
                                                    )
                                                }
                                            )
                                        )
                                    }
                                )
                            ),
                            "pluginConfig": maybe(
                                st.lists(
                                    st.fixed_dictionaries(
                                        {
                                            "name": st.sampled_from(
                                                [
                                                    "NetworkOverhead",
                                                    "NetworkBandwidth",
                                                    "NodeResourcesAllocatable",
                                                    "LowNodeLoad",
                                                    "NetworkRebalance",
                                                ]
                                            ),
                                            "args": maybe(
                                                st.dictionaries(
                                                    st.sampled_from(
                                                        [
                                                            "accountingMode",
                                                            "defaultNodeBandwidth",
                                                            "namespaces",
                                                            "mode",
                                                            "resources",
                                                            "lowThresholds",
                                                            "highThresholds",
                                                            "nodeSelector",
                                                            "podSelectors",
                                                            "weights",
                                                            "cooldown",
                                                            "minGainPerMove",
                                                            "maxMovesPerCycle",
                                                            "planBudget",
                                                        ]
                                                    ),
                                                    json_values,
                                                    max_size=3,
                                                )
                                            ),
                                        }
                                    ),
                                    max_size=2,
                                )
                            ),
                        }
                    ),
                    max_size=2,
                )
            ),
        }
    ),
)


@FUZZ_CLI
@given(config_documents)
def test_config_files_are_validated_whole_with_one_line_errors(
    tmp_path_factory: pytest.TempPathFactory, document: Any
) -> None:
    tmp_path = tmp_path_factory.mktemp("config")
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(yaml.safe_dump_all(small_cluster()))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(document))
    for command in (
        ["schedule", "-f", str(snapshot), "--pod", str(ROOT / "hack" / "pod-p1.yaml"), "--config", str(config)],
        ["deschedule", "-f", str(snapshot), "--policy", str(config)],
    ):
        result = CliRunner().invoke(cli, [*command, "-o", "json"])
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert result.exit_code in (0, 1)
        if result.exit_code == 1:
            assert result.stderr.startswith(f"error: {config}: ") and result.stderr.count("\n") == 1, result.stderr


# --- the HTTP servers, in a thread of their own ----------------------------------------------------------------------


class Served:
    def __init__(self, port: int) -> None:
        self.port = port

    def post(self, path: str, body: bytes) -> tuple[int, Any]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=body, headers={"Content-Type": "application/json"}
        )
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        assert time.perf_counter() - started < CASE_SECONDS
        return status, json.loads(text) if text else None


def serve_in_thread(app: Any) -> Iterator[Served]:
    from aiohttp import web

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    done = asyncio.Event()  # set from this thread through the loop
    runner = web.AppRunner(app, access_log=None)

    async def main() -> None:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        ready.set()
        await done.wait()
        await runner.cleanup()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    ready.wait(10)
    yield Served(port)
    loop.call_soon_threadsafe(done.set)
    thread.join(10)


def extender_state(mode: str) -> ExtenderState:
    """The extender's state on the examples; with ``plan-ungated``, AppGroup a1's pods (which the fuzzed pods may
    claim to be) are planned when asked about."""
    documents = example_documents()
    for document in documents:
        if mode and document.get("kind") == "AppGroup":
            document["metadata"]["annotations"] = {"netaware.io/ordered-scheduling": mode}
    snapshot = build_snapshot(documents)
    config = parse_config(yaml.safe_load((ROOT / "hack" / "configs" / "scheduler-config.yaml").read_text()))
    return ExtenderState(lambda: snapshot, config)


@pytest.fixture(scope="module", params=["", "plan-ungated"])
def extender(request: pytest.FixtureRequest) -> Iterator[Served]:
    yield from serve_in_thread(extender_app(extender_state(request.param)))


@pytest.fixture(scope="module")
def placing_extender() -> Iterator[Served]:
    """The extender serving its placement webhook, a1 plan-ungated (the fuzzed pods may claim to be its)."""
    state = extender_state("plan-ungated")
    state.follower.admitted = AdmittedPods(lambda old, new: None)  # the answers are fuzzed here, not the counting
    yield from serve_in_thread(extender_app(state))


@pytest.fixture(scope="module")
def webhook() -> Iterator[Served]:
    # the bandwidth guarantee on: hostile pods go through the resource requests too
    view = ClusterView.from_snapshot(build_snapshot(example_documents()))
    yield from serve_in_thread(webhook_app(view, resources=Accounting.COMBINED))


extender_pods = st.builds(
    lambda pod, annotations: (
        {**pod, "metadata": {**pod["metadata"], "annotations": annotations}}
        if isinstance(pod.get("metadata"), dict)
        else pod
    ),
    pods(),
    maybe(bandwidth_annotations),
)
node_objects = st.lists(st.sampled_from(["n-1", "n-2", "n-9"]).flatmap(lambda name: nodes(name=name)), max_size=3)
extender_args = st.one_of(
    st.fixed_dictionaries(
        {"Pod": maybe(extender_pods), "NodeNames": maybe(st.lists(st.sampled_from(["n-1", "n-5", "zz"]), max_size=4))}
    ),
    st.fixed_dictionaries(
        {"Pod": maybe(extender_pods), "Nodes": maybe(st.fixed_dictionaries({"items": maybe(node_objects)}))}
    ),
    json_values,
)


@FUZZ
@given(extender_args)
@example(
    {
        "Pod": {"metadata": {"name": "x", "annotations": {"kubernetes.io/ingress-bandwidth": "1e30"}}},
        "NodeNames": ["n-1"],
    }
)
@example({"Pod": {"metadata": {"name": "x"}}, "Nodes": {"items": None}})
@example(  # a pending pod of a1: planned when a1 is plan-ungated, an unknown node beside
    {
        "Pod": {
            "metadata": {
                "name": "x",
                "namespace": "default",
                "labels": {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": "p1"},
            },
            "spec": {"containers": [{"resources": {"requests": {"cpu": "1e15"}}}]},
        },
        "NodeNames": ["n-1", "zz"],
    }
)
@example({"Pod": {"metadata": {"name": "x"}}, "Nodes": {"items": [{"metadata": ["n-1"]}, {"metadata": "n-2"}, 5]}})
@example(
    {
        "Pod": {"metadata": {"name": "x", "annotations": {"kubernetes.io/ingress-bandwidth": "1M"}}},
        "Nodes": {
            "items": [{"metadata": {"name": "n", "annotations": {"node.kubernetes.io/network-limit": "9" * 5000}}}]
        },
    }
)
def test_extender_answers_200_or_400_never_5xx(extender: Served, args: Any) -> None:
    for verb in ("/filter", "/prioritize"):
        status, answer = extender.post(verb, json.dumps(args).encode())
        assert status in (200, 400), answer
        if status == 400:
            assert isinstance(answer["Error"], str) and answer["Error"]
        elif verb == "/filter":
            assert answer["Error"] == "" and isinstance(answer["FailedNodes"], dict)
        else:
            assert all(0 <= entry["Score"] <= 10 for entry in answer)


def test_one_bad_node_fails_alone(extender: Served) -> None:
    good = {"metadata": {"name": "good", "annotations": {"node.kubernetes.io/network-limit": "1G"}}}
    huge = {"metadata": {"name": "huge", "annotations": {"node.kubernetes.io/network-limit": "1e308"}}}
    args = {"Pod": {"metadata": {"name": "x", "annotations": {"kubernetes.io/ingress-bandwidth": "1M"}}}}
    status, answer = extender.post("/filter", json.dumps({**args, "Nodes": {"items": [good, huge]}}).encode())
    assert status == 200
    assert [item["metadata"]["name"] for item in answer["Nodes"]["items"]] == ["good"]
    assert "metadata.annotations[node.kubernetes.io/network-limit]: out of range" in answer["FailedNodes"]["huge"]


def admission(pod: Any) -> bytes:
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"kind": "Pod"}, "operation": "CREATE", "namespace": "default", "object": pod},
    }
    return json.dumps(review).encode()


@FUZZ
@given(extender_pods)
@example({"metadata": {"name": "x", "annotations": {"kubernetes.io/ingress-bandwidth": "1e99999999"}}})
@example(
    {
        "metadata": {"name": "x", "annotations": {"kubernetes.io/ingress-bandwidth": "1M"}},
        "spec": {"containers": [{"name": "c", "resources": None}], "initContainers": 7},
    }
)
def test_webhook_answers_and_every_patch_applies(webhook: Served, pod: Any) -> None:
    status, answer = webhook.post("/mutate-pods", admission(pod))
    assert status in (200, 400), answer
    if status == 200 and answer["response"]["allowed"] and "patch" in answer["response"]:
        patch = json.loads(base64.b64decode(answer["response"]["patch"]))
        jsonpatch.apply_patch(pod, patch)


a1_pods = st.builds(
    lambda pod, workload: (
        {**pod, "metadata": {**pod["metadata"], "namespace": "default", "labels": {
            "appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": workload}}}
        if isinstance(pod.get("metadata"), dict)
        else pod
    ),
    extender_pods,
    st.sampled_from(["p1", "p2", "p3", "nope"]),
)  # fmt: skip


A1_P1 = {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": "p1"}


@FUZZ
@given(st.one_of(a1_pods.map(admission), json_values.map(lambda value: json.dumps(value).encode())))
@example(admission({"metadata": {"generateName": "p1-", "namespace": "default", "labels": A1_P1},
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1e15"}}}]}}))  # fmt: skip
@example(admission({"metadata": {"name": "x", "namespace": "default", "labels": A1_P1}, "spec": None}))
@example(admission({"metadata": {"name": "x", "labels": {"appgroup.diktyo.x-k8s.io": "a1"}}, "spec": []}))
def test_placement_answers_and_every_patch_applies(placing_extender: Served, body: bytes) -> None:
    # a pod of a1 (plan-ungated) is planned and pinned, any other admitted unchanged; a body that is not a review
    # of a pod is a 400 naming the field, never a 5xx
    status, answer = placing_extender.post("/place-pods", body)
    assert status in (200, 400), answer
    if status == 400:
        assert isinstance(answer["error"], str) and answer["error"]
        return
    response = answer["response"]
    assert response["allowed"] is True
    if "patch" in response:
        pod = json.loads(body)["request"]["object"]
        placed = jsonpatch.apply_patch(pod, json.loads(base64.b64decode(response["patch"])))
        assert placed["metadata"]["annotations"]["netaware.io/planned-node"]


@pytest.mark.parametrize("value", HOSTILE_QUANTITIES)
def test_webhook_admits_only_bandwidths_and_names_the_rest(webhook: Served, value: str) -> None:
    pod = {"metadata": {"name": "x", "annotations": {"kubernetes.io/egress-bandwidth": value}}}
    status, answer = webhook.post("/mutate-pods", admission(pod))
    assert status == 200
    response = answer["response"]
    try:
        parse_bandwidth(value)
    except QuantityError:
        assert response["allowed"] is False
        assert response["status"]["message"].startswith("metadata.annotations[kubernetes.io/egress-bandwidth]: ")
    else:  # "1e-999999999" is 1n, "-0" is 0: tiny but bandwidths
        assert response["allowed"] is True


# --- the slo-controller-config parser -----------------------------------------------------------------------------


slo_data = st.dictionaries(
    st.sampled_from(["resource-qos-config", "system-config", "other"]),
    st.one_of(st.text(max_size=30), json_values.map(json.dumps)),
    max_size=3,
)


@settings(max_examples=500, deadline=None)
@given(slo_data)
@example({"system-config": json.dumps({"clusterStrategy": {"totalNetworkBandwidth": "1e99999999"}})})
@example(
    {"resource-qos-config": json.dumps({"clusterStrategy": {"lsClass": {"networkQOS": {"ingressRequest": "-5G"}}}})}
)
def test_slo_controller_config_is_refused_per_key_never_raised(data: dict[str, str]) -> None:
    node = Node.parse({"metadata": {"name": "n-1", "labels": {"a": "b"}}})
    started = time.thread_time()  # CPU time: a hang, not a wait for the CPU (see the quantities test)
    state = update_config(ConfigState(), data, [node])
    assert time.thread_time() - started < CASE_SECONDS
    for key, problem in state.problems.items():
        assert key in ("resource-qos-config", "system-config") and str(problem)
