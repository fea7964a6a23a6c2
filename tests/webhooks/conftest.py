from __future__ import annotations

import asyncio
import pathlib
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import trustme
import yaml

from operators.engine.cluster.snapshot import build_snapshot
from operators.serving import ReloadingTLS
from webhooks.server import build_app, serve
from webhooks.view import ClusterView

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "hack" / "examples"


@dataclass
class RunningWebhook:
    url: str
    client_context: ssl.SSLContext
    tls: ReloadingTLS
    cert_file: pathlib.Path
    key_file: pathlib.Path
    ca: trustme.CA


def example_view() -> ClusterView:
    documents = [
        d
        for name in ("cluster.yaml", "appgroup-a1.yaml")
        for d in yaml.safe_load_all((EXAMPLES / name).read_text())
        if d
    ]
    for document in documents:
        if document["kind"] == "Namespace" and document["metadata"]["name"] == "default":
            document["metadata"]["annotations"] = {"netaware.io/default-ingress-bandwidth": "1G"}
    return ClusterView.from_snapshot(build_snapshot(documents))


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningWebhook]:
    """The real server over TLS (a trustme CA), in its own thread and event loop."""
    folder = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    cert_file, key_file = folder / "tls.crt", folder / "tls.key"
    leaf.private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    leaf.private_key_pem.write_to_path(str(key_file))
    tls = ReloadingTLS(str(cert_file), str(key_file))
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    started = threading.Event()

    async def main() -> None:
        task = asyncio.create_task(serve(build_app(example_view()), "127.0.0.1", port, tls, stop, reload_interval=0.2))
        await asyncio.sleep(0.2)
        started.set()
        await task

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    started.wait(10)
    yield RunningWebhook(f"https://127.0.0.1:{port}", client_context, tls, cert_file, key_file, ca)
    loop.call_soon_threadsafe(stop.set)
    thread.join(10)


def review(pod: Any, uid: str = "u-1", operation: str = "CREATE", **request: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": operation,
            "object": pod,
            **request,
        },
    }


def pod(annotations: dict[str, str] | None = None, selector: str | None = "p2") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "default"}
    if annotations is not None:
        meta["annotations"] = annotations
    if selector:
        meta["labels"] = {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": selector}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [{"name": "c"}]}}
