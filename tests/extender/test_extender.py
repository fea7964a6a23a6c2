"""The extender over HTTP: both nodeCacheCapable forms, bad input, agreement with `netaware schedule`."""

from __future__ import annotations

import json
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner

from operators.api.config.scheduler import parse_config
from operators.cli.main import cli
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot, build_snapshot
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.schedule import schedule
from operators.extender.answers import ExtenderState
from operators.extender.server import build_app, extender_scores, serve
from operators.serving import ReloadingTLS

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "hack" / "examples"
CONFIG = parse_config(yaml.safe_load((ROOT / "hack" / "configs" / "scheduler-config.yaml").read_text()))
NODES = [f"n-{i}" for i in range(1, 9)]


def documents() -> list[dict[str, Any]]:
    return [d for path in sorted(EXAMPLES.glob("*.yaml")) for d in yaml.safe_load_all(path.read_text()) if d]


def p1_pod() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "hack" / "pod-p1.yaml").read_text())


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    snapshot = build_snapshot(documents())
    async with TestClient(TestServer(build_app(ExtenderState(lambda: snapshot, CONFIG)))) as test_client:
        yield test_client


async def test_filter_with_node_names(client: TestClient[Any, Any]) -> None:
    response = await client.post("/filter", json={"Pod": p1_pod(), "NodeNames": [*NODES, "ghost"], "Nodes": None})
    assert response.status == 200
    answer = await response.json()
    assert answer["NodeNames"] == NODES and answer["Nodes"] is None and answer["Error"] == ""
    assert answer["FailedNodes"] == {"ghost": "node ghost is not known to the extender"}


async def test_filter_with_node_objects_answers_in_the_same_form(client: TestClient[Any, Any]) -> None:
    nodes = [d for d in documents() if d["kind"] == "Node"]
    nodes[0]["metadata"]["annotations"]["node.koordinator.sh/network-bandwidth"] = "10M"  # as sent by the scheduler
    pod = p1_pod()
    pod["metadata"]["annotations"]["kubernetes.io/egress-request"] = "500M"
    response = await client.post("/filter", json={"Pod": pod, "Nodes": {"items": nodes}})
    answer = await response.json()
    assert answer["NodeNames"] is None
    assert [item["metadata"]["name"] for item in answer["Nodes"]["items"]] == NODES[1:]
    assert "insufficient egress bandwidth" in answer["FailedNodes"]["n-1"]


async def test_prioritize_agrees_with_netaware_schedule(client: TestClient[Any, Any]) -> None:
    response = await client.post("/prioritize", json={"Pod": p1_pod(), "NodeNames": NODES})
    scores = {entry["Host"]: entry["Score"] for entry in await response.json()}
    assert set(scores) == set(NODES) and all(0 <= score <= 10 for score in scores.values())
    result = CliRunner().invoke(
        cli,
        [
            "schedule",
            "-f",
            str(EXAMPLES),
            "--pod",
            str(ROOT / "hack" / "pod-p1.yaml"),
            "--config",
            str(ROOT / "hack" / "configs" / "scheduler-config.yaml"),
        ],
    )
    offline = json.loads(result.stdout)
    assert scores == extender_scores(offline["totalScore"], CONFIG)
    assert scores[offline["selectedNode"]] == max(scores.values())
    assert offline["selectedNode"] == "n-2"  # overhead 95 x 5 + bandwidth 85 x 2 beats n-1's 100 x 5 + 0 x 2
    direct = schedule(Pod.parse(p1_pod()), ClusterIndex.build(build_snapshot(documents())), CONFIG)
    assert direct.total == offline["totalScore"]


@pytest.mark.parametrize(
    ("body", "content_type", "status", "message"),
    [
        (b"{not json", "application/json", 400, "not JSON"),
        (b'{"NodeNames": []}', "application/json", 400, "ExtenderArgs.Pod must be a Pod object"),
        (
            b'{"Pod": {"metadata": {"name": "x"}}, "NodeNames": "n-1"}',
            "application/json",
            400,
            "NodeNames must be a list",
        ),
        (b'{"Pod": {"metadata": {"name": "x"}}}', "application/json", 400, "needs NodeNames"),
        (b'{"Pod": {"metadata": {}}, "NodeNames": []}', "application/json", 400, "ExtenderArgs.Pod"),
        (b"{}", "text/plain", 400, "Content-Type must be application/json"),
        (b'{"x": "' + b"y" * (32 * 1024 * 1024 + 5) + b'"}', "application/json", 413, "larger than"),
    ],
)
async def test_bad_input_is_refused_and_the_next_request_is_served(
    client: TestClient[Any, Any], body: bytes, content_type: str, status: int, message: str
) -> None:
    for verb in ("/filter", "/prioritize"):
        response = await client.post(verb, data=body, headers={"Content-Type": content_type})
        assert response.status == status
        assert message in (await response.json())["Error"]
    response = await client.post("/filter", json={"Pod": p1_pod(), "NodeNames": NODES})
    assert response.status == 200
    # each refusal counted by verb and code, and the other codes' series there at 0 (an alert's rate() sees them)
    metrics = await (await client.get("/metrics")).text()
    for verb in ("filter", "prioritize"):
        for code in ("400", "413", "503"):
            count = 1.0 if code == str(status) else 0.0
            assert f'netaware_extender_errors_total{{code="{code}",verb="{verb}"}} {count}' in metrics, metrics


async def test_no_answer_from_a_cache_that_has_not_synced() -> None:
    """Before its watches have synced, the extender refuses (503) rather than place pods on a partial view."""
    synced = False
    snapshot = build_snapshot(documents())
    state = ExtenderState(lambda: snapshot, CONFIG, lambda: synced)
    async with TestClient(TestServer(build_app(state))) as test_client:
        for verb in ("/filter", "/prioritize"):
            response = await test_client.post(verb, json={"Pod": p1_pod(), "NodeNames": NODES})
            assert response.status == 503
            assert (await response.json())["Error"] == "cluster cache not synced yet"
        assert (await test_client.get("/readyz")).status == 503
        metrics = await (await test_client.get("/metrics")).text()
        assert 'netaware_extender_errors_total{code="503",verb="filter"} 1.0' in metrics
        synced = True
        assert (await test_client.post("/filter", json={"Pod": p1_pod(), "NodeNames": NODES})).status == 200


async def test_probes_and_metrics(client: TestClient[Any, Any]) -> None:
    await client.post("/filter", json={"Pod": p1_pod(), "NodeNames": NODES})
    assert (await client.get("/healthz")).status == 200
    assert (await client.get("/readyz")).status == 200
    text = await (await client.get("/metrics")).text()
    assert 'netaware_extender_latency_seconds_count{verb="filter"}' in text


async def test_answers_follow_the_current_snapshot_for_a_repeated_node_list() -> None:
    """/filter remembers the last NodeNames list and the pod's NetworkOverhead; neither may outlive the snapshot."""

    def cluster(p2_node: str) -> Snapshot:
        objects = documents()
        for document in objects:
            if document["kind"] == "AppGroup" and document["metadata"]["name"] == "a1":
                document["spec"]["workloads"][0]["dependencies"][0]["maxNetworkCost"] = 0
            if document["kind"] == "Pod" and document["metadata"]["name"].startswith("p2-"):
                document["spec"]["nodeName"] = p2_node
        return build_snapshot(objects)

    current = [cluster("n-1")]
    async with TestClient(TestServer(build_app(ExtenderState(lambda: current[0], CONFIG)))) as test_client:
        answers = []
        for p2_node in ("n-1", "n-5"):
            current[0] = cluster(p2_node)
            for _ in range(2):  # the second call is served from the remembered candidates and overhead
                response = await test_client.post("/filter", json={"Pod": p1_pod(), "NodeNames": NODES})
                answers.append((await response.json())["NodeNames"])
    assert answers == [["n-1", "n-2"]] * 2 + [["n-5", "n-6"]] * 2


async def test_bodies_as_kube_scheduler_encodes_them_get_the_answers_of_any_other_encoding() -> None:
    """kube-scheduler's encoding (Go's field order, no spaces) takes the NodeNames memo and the priority template
    from the second pod on; another encoding takes neither: the answers are the same."""
    snapshot = build_snapshot(documents())
    other = p1_pod()
    other["metadata"].update(name="p1-other", labels={**other["metadata"]["labels"], "pod-template-hash": "b"})
    other["metadata"]["annotations"]["kubernetes.io/egress-request"] = "900M"
    answers: dict[str, list[Any]] = {"go": [], "spaced": []}
    for encoding, got in answers.items():
        async with TestClient(TestServer(build_app(ExtenderState(lambda: snapshot, CONFIG)))) as test_client:
            for pod in (p1_pod(), other, p1_pod()):
                for verb in ("/filter", "/prioritize"):
                    args = {"Pod": pod, "Nodes": None, "NodeNames": NODES}
                    body = orjson.dumps(args) if encoding == "go" else json.dumps(args, indent=1).encode()
                    response = await test_client.post(verb, data=body, headers={"Content-Type": "application/json"})
                    got.append(await response.json())
    assert answers["go"] == answers["spaced"]
    assert answers["go"][0]["NodeNames"] == NODES and answers["go"][2]["NodeNames"] != NODES  # 900M fits fewer
    assert [entry["Host"] for entry in answers["go"][3]] == NODES


@pytest.mark.parametrize(
    "keys",
    [
        ("Pod", "NodeNames", "Nodes"),
        ("pod", "nodeNames", "nodes"),
        ("POD", "NODENAMES", "NODES"),
        ("pod", "nodenames", "nodes"),
    ],
)
async def test_field_names_match_as_gos_decoder_matches_them(
    client: TestClient[Any, Any], keys: tuple[str, ...]
) -> None:
    """ExtenderArgs has no json tags: Go's decoder matches its keys to Pod, NodeNames and Nodes in any case, so
    kube-scheduler's own test doubles send either; the answer is the same."""
    pod_key, names_key, nodes_key = keys
    pod = p1_pod()
    pod["metadata"]["annotations"]["kubernetes.io/egress-request"] = "900M"  # fits fewer nodes than all
    expected = await (await client.post("/filter", json={"Pod": pod, "NodeNames": NODES})).json()
    by_names = await (await client.post("/filter", json={pod_key: pod, names_key: NODES})).json()
    assert by_names == expected and by_names["NodeNames"] != NODES
    nodes = [d for d in documents() if d["kind"] == "Node"]
    by_objects = await (await client.post("/filter", json={pod_key: pod, nodes_key: {"Items": nodes}})).json()
    assert [item["metadata"]["name"] for item in by_objects["Nodes"]["items"]] == expected["NodeNames"]
    scores = await (await client.post("/prioritize", json={pod_key: pod, names_key: NODES})).json()
    assert [entry["Host"] for entry in scores] == NODES


async def test_extender_serves_over_tls(tmp_path: pathlib.Path) -> None:
    import asyncio
    import socket
    import ssl

    import aiohttp
    import trustme

    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    leaf.private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    leaf.private_key_pem.write_to_path(str(key_file))
    context = ssl.create_default_context()
    ca.configure_trust(context)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    snapshot = build_snapshot(documents())
    stop = asyncio.Event()
    server = asyncio.create_task(
        serve(
            build_app(ExtenderState(lambda: snapshot, CONFIG)),
            "127.0.0.1",
            port,
            ReloadingTLS(str(cert_file), str(key_file)),
            stop,
        )
    )
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(100):
                try:
                    async with session.post(
                        f"https://127.0.0.1:{port}/filter", json={"Pod": p1_pod(), "NodeNames": NODES}, ssl=context
                    ) as response:
                        assert (await response.json())["NodeNames"] == NODES
                    break
                except aiohttp.ClientConnectorError:
                    await asyncio.sleep(0.05)
            else:
                pytest.fail("the extender did not start")
            with pytest.raises(aiohttp.ClientError):  # no plain-text fallback on the TLS port
                async with session.post(f"http://127.0.0.1:{port}/filter", json={}) as response:
                    await response.read()
    finally:
        stop.set()
        await server
