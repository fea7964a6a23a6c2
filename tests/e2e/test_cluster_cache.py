"""The cluster cache against the real kube-apiserver: lists page with the server's continue tokens, then
watches (with bookmarks asked for) deliver creates, updates and deletes; one list per kind, no re-list per
event; an update the engine does not read (a status the trim drops) is no change."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from hack.control_plane.cluster import ControlPlane
from operators.kube import cluster_api_client
from operators.sources.cache import ClusterCache
from operators.sources.kinds import NODES, PODS
from tests.support.e2e import create_namespace, delete_namespace
from tests.support.emulated import recorder

pytestmark = pytest.mark.e2e

NS = "cache-e2e"


def pod(name: str, node: str, bandwidth: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"appgroup.diktyo.x-k8s.io": "a1"},
            "annotations": {"kubernetes.io/ingress-bandwidth": bandwidth},
        },
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }


async def _follow(cluster: ControlPlane) -> None:
    create_namespace(cluster, NS)
    api = await cluster_api_client(str(cluster.kubeconfig))
    cache = ClusterCache((NODES, PODS), page_size=3)  # the example cluster's 8 nodes come in 3 pages
    seen = recorder(cache)
    stop = asyncio.Event()
    task = asyncio.create_task(cache.follow(api, stop))
    try:
        await asyncio.wait_for(cache.wait_synced(), 30)
        assert len(cache.snapshot().nodes) >= 8
        for index in range(3):
            cluster.kubectl("apply", "-f", "-", stdin=json.dumps(pod(f"p-{index}", "n-1", "100M")))
        await _until(lambda: len([p for p in cache.snapshot().pods if p.namespace == NS]) == 3)
        cluster.kubectl("annotate", "pod", "-n", NS, "p-0", "kubernetes.io/ingress-bandwidth=300M", "--overwrite")
        await _until(lambda: cache.get(PODS, NS, "p-0").annotations["kubernetes.io/ingress-bandwidth"] == "300M")
        cluster.kubectl("delete", "pod", "-n", NS, "p-1", "--grace-period=0", "--force", check=False)
        await _until(lambda: cache.get(PODS, NS, "p-1") is None)
        assert ("pods", "changed", "p-0") in seen and ("pods", "deleted", "p-1") in seen
        assert cache.lists == {"nodes": 1, "pods": 1}  # every change came by watch
    finally:
        stop.set()
        await task
        await api.close()
        delete_namespace(cluster, NS)


async def _until(check: Any, within: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not check():
        if loop.time() > deadline:
            raise AssertionError("not reached within 30 s")
        await asyncio.sleep(0.1)


def test_the_cache_follows_the_real_api_server(cluster: ControlPlane) -> None:
    asyncio.run(_follow(cluster))
