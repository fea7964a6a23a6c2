"""The webhook over TLS: patches, idempotence, bad input, fuzzing, TLS reload, probes and metrics."""

from __future__ import annotations

import base64
import http.client
import json
import pathlib
import ssl
import time
from typing import Any

import jsonpatch
import pytest
import trustme
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.webhooks.conftest import RunningWebhook, pod, review
from webhooks.configuration import mutating_webhook_configuration


class Client:
    def __init__(self, webhook: RunningWebhook) -> None:
        host, port = webhook.url.removeprefix("https://").split(":")
        self.connection = http.client.HTTPSConnection(host, int(port), context=webhook.client_context, timeout=10)

    def post(
        self, body: bytes | Any, content_type: str = "application/json", path: str = "/mutate-pods"
    ) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.connection.request("POST", path, body=data, headers={"Content-Type": content_type})
        response = self.connection.getresponse()
        payload = response.read()
        return response.status, json.loads(payload) if payload.startswith(b"{") else payload

    def get(self, path: str) -> tuple[int, bytes]:
        self.connection.request("GET", path)
        response = self.connection.getresponse()
        return response.status, response.read()


@pytest.fixture(scope="module")
def client(webhook: RunningWebhook) -> Client:
    return Client(webhook)


def patch_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
    response = answer["response"]
    if "patch" not in response:
        return []
    assert response["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))


def test_appgroup_pod_is_patched_and_a_second_admission_is_a_no_op(client: Client) -> None:
    original = pod()
    status, answer = client.post(review(original, uid="abc-123"))
    assert status == 200 and answer["response"]["uid"] == "abc-123" and answer["response"]["allowed"]
    patch = patch_of(answer)
    assert patch[0]["op"] == "add" and patch[0]["path"] == "/metadata/annotations"
    mutated = jsonpatch.apply_patch(original, patch)
    annotations = mutated["metadata"]["annotations"]
    assert annotations["kubernetes.io/egress-request"] == "250Mi"
    assert annotations["kubernetes.io/ingress-request"] == "100Mi"
    assert annotations["kubernetes.io/ingress-bandwidth"] == "1G"  # the namespace default
    _, again = client.post(review(mutated, uid="abc-124"))
    assert again["response"] == {"uid": "abc-124", "allowed": True}  # no patch at all


def test_keys_are_escaped_when_the_map_exists(client: Client) -> None:
    _, answer = client.post(review(pod({"team": "x"}, selector="p3")))
    paths = [operation["path"] for operation in patch_of(answer)]
    assert "/metadata/annotations/kubernetes.io~1ingress-request" in paths


def test_dry_run_and_other_operations(client: Client) -> None:
    _, answer = client.post(review(pod(), dryRun=True))
    assert answer["response"]["allowed"] and patch_of(answer)  # same answer, and nothing else happens
    _, answer = client.post(review(pod(), operation="UPDATE"))
    assert answer["response"] == {"uid": "u-1", "allowed": True}


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({"kubernetes.io/ingress-bandwidth": "10Q"}, "metadata.annotations[kubernetes.io/ingress-bandwidth]"),
        ({"kubernetes.io/egress-bandwidth": "-1M"}, "negative bandwidth"),
        ({"kubernetes.io/ingress-bandwidth": "100M", "kubernetes.io/ingress-request": "200M"}, "is above"),
        ({"koordinator.sh/networkQOS": "{not json"}, "koordinator.sh/networkQOS"),
    ],
)
def test_invalid_pods_are_denied_with_200(client: Client, annotations: dict[str, str], message: str) -> None:
    status, answer = client.post(review(pod(annotations)))
    assert status == 200
    assert answer["response"]["allowed"] is False
    assert message in answer["response"]["status"]["message"]


@pytest.mark.parametrize(
    ("body", "content_type", "message"),
    [
        (b"{not json", "application/json", "not a valid AdmissionReview"),
        (b'{"kind": "Pod"}', "application/json", "expected an admission.k8s.io/v1 AdmissionReview"),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}).encode(),
            "application/json",
            "request.uid is missing",
        ),
        (b"{}", "text/plain", "Content-Type must be application/json"),
        (b'{"a": "' + b"x" * (3 * 1024 * 1024 + 10) + b'"}', "application/json", "larger than"),
    ],
)
def test_bad_requests_are_400_and_the_next_one_is_served(
    client: Client, body: bytes, content_type: str, message: str
) -> None:
    status, answer = client.post(body, content_type)
    assert status == 400 and message in answer["error"]
    status, _ = client.post(review(pod()))
    assert status == 200


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
annotation_values = st.sampled_from(
    ["1G", "100Mi", "-5", "10Q", "", "1e3", "0", "{}", '{"ingressLimit": "1M"}', '{"egressRequest": 5}', "[1]", "1.5Gi"]
) | st.text(max_size=12)
annotation_keys = st.sampled_from(
    [
        "kubernetes.io/ingress-bandwidth",
        "kubernetes.io/egress-bandwidth",
        "kubernetes.io/ingress-request",
        "kubernetes.io/egress-request",
        "koordinator.sh/networkQOS",
        "netaware.io/bandwidth-source",
        "other",
    ]
)
fuzzed_pods = (
    st.fixed_dictionaries(
        {
            "apiVersion": st.just("v1"),
            "kind": st.just("Pod"),
            "metadata": st.fixed_dictionaries(
                {
                    "name": st.text(max_size=8),
                    "annotations": st.dictionaries(annotation_keys, annotation_values, max_size=5) | json_values,
                    "labels": st.fixed_dictionaries(
                        {
                            "appgroup.diktyo.x-k8s.io": st.sampled_from(["a1", "x"]),
                            "appgroup.diktyo.x-k8s.io.workload": st.sampled_from(["p1", "p2", "p3", "q"]),
                        }
                    )
                    | json_values,
                }
            ),
        }
    )
    | json_values
)
fuzzed_reviews = st.one_of(
    fuzzed_pods.map(review),
    st.fixed_dictionaries(
        {
            "apiVersion": st.sampled_from(["admission.k8s.io/v1", "v1"]),
            "kind": st.sampled_from(["AdmissionReview", "Pod"]),
            "request": json_values,
        }
    ),
    json_values,
)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(fuzzed_reviews)
def test_fuzzed_admission_reviews_never_get_a_5xx(client: Client, body: Any) -> None:
    status, answer = client.post(body)
    assert status in (200, 400), answer
    if status == 200 and isinstance(body, dict) and isinstance(body.get("request"), dict):
        assert answer["response"]["uid"] == body["request"]["uid"]
        if answer["response"]["allowed"] and "patch" in answer["response"]:
            jsonpatch.apply_patch(body["request"]["object"], patch_of(answer))  # the patch applies


def test_probes_and_metrics(client: Client) -> None:
    assert client.get("/healthz") == (200, b"ok")
    assert client.get("/readyz") == (200, b"ok")
    status, text = client.get("/metrics")
    assert status == 200
    assert b'controller_runtime_webhook_requests_total{code="200",webhook="mutate-pods"}' in text
    assert b"controller_runtime_webhook_latency_seconds_bucket" in text


def test_certificates_are_reloaded_when_the_files_change(webhook: RunningWebhook) -> None:
    other_ca = trustme.CA()
    leaf = other_ca.issue_cert("127.0.0.1")
    leaf.private_key_pem.write_to_path(str(webhook.key_file))
    leaf.private_key_and_cert_chain_pem.write_to_path(str(webhook.cert_file))
    context = ssl.create_default_context()
    other_ca.configure_trust(context)
    host, port = webhook.url.removeprefix("https://").split(":")
    deadline = time.monotonic() + 5
    while True:
        try:
            connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=5)
            connection.request("GET", "/healthz")
            assert connection.getresponse().status == 200
            break
        except ssl.SSLError:
            assert time.monotonic() < deadline, "the new certificate was not picked up"
            time.sleep(0.1)


def test_webhook_configuration_is_safe_by_default() -> None:
    import kubernetes_validate

    configuration = mutating_webhook_configuration("netaware", "netaware-webhook", "netaware-system", "Q0E=")
    kubernetes_validate.validate(configuration, "1.33.0", strict=True)
    (hook,) = configuration["webhooks"]
    assert hook["failurePolicy"] == "Ignore" and hook["timeoutSeconds"] == 2 and hook["sideEffects"] == "None"
    assert hook["reinvocationPolicy"] == "IfNeeded"
    assert hook["namespaceSelector"]["matchExpressions"][0] == {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", "netaware-system"],
    }
    assert hook["clientConfig"]["service"]["path"] == "/mutate-pods"


async def test_a_half_rotated_pair_keeps_the_last_valid_one(tmp_path: pathlib.Path) -> None:
    """A new certificate next to the old key (a rotation half-way): not taken, the old pair keeps serving;
    once the new key is there too, the new pair is taken."""
    from aiohttp import ClientSession, TCPConnector, web

    from operators.serving import ReloadingTLS

    old_ca, new_ca = trustme.CA(), trustme.CA()
    old, new = old_ca.issue_cert("127.0.0.1"), new_ca.issue_cert("127.0.0.1")
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    old.cert_chain_pems[0].write_to_path(str(cert_file))
    old.private_key_pem.write_to_path(str(key_file))
    tls = ReloadingTLS(str(cert_file), str(key_file))
    app = web.Application()
    app.router.add_get("/healthz", lambda _: web.Response(text="ok"))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def served_by(ca: trustme.CA) -> bool:
        context = ssl.create_default_context()
        ca.configure_trust(context)
        try:
            async with (
                ClientSession(connector=TCPConnector(ssl=context, force_close=True)) as session,
                session.get(f"https://127.0.0.1:{port}/healthz") as response,
            ):
                return response.status == 200
        except (ssl.SSLError, OSError):
            return False

    try:
        assert await served_by(old_ca)
        new.cert_chain_pems[0].write_to_path(str(cert_file))  # the certificate first, the key not yet
        with pytest.raises(ssl.SSLError):
            tls.reload_if_changed()
        assert await served_by(old_ca) and not await served_by(new_ca)
        new.private_key_pem.write_to_path(str(key_file))
        assert tls.reload_if_changed()
        assert await served_by(new_ca) and not await served_by(old_ca)
    finally:
        await runner.cleanup()
