"""Which pods a plan checks node by node for what it cannot change (``needs_static``): a pod whose only volume is the
service-account token the API server projects into every pod is not one of them; a claim, a generic ephemeral
volume or an inline disk is."""

from __future__ import annotations

from typing import Any

import pytest

from operators.engine.cluster.kube import filters as kube_filters
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.planning.constraints import needs_static
from operators.engine.scheduling.index import ClusterIndex
from tests.support.planning import node, pod

TOKEN = {"name": "kube-api-access-x7k2p", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
CONFIG_MAP = {"name": "settings", "configMap": {"name": "settings"}}
CLAIM = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
EPHEMERAL = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
DISK = {"name": "disk", "gcePersistentDisk": {"pdName": "pd-1"}}


def needs(volumes: list[dict[str, Any]]) -> bool:
    raw = pod("b-0", "b", spec={"volumes": volumes})
    index = ClusterIndex.build(build_snapshot([node("n1", "za"), raw]))
    return needs_static(kube_filters.prefilter(Pod.parse(raw), index.placed, index.requested))


def test_the_projected_token_and_config_volumes_need_no_node_by_node_check() -> None:
    assert needs([]) is False
    assert needs([TOKEN]) is False
    assert needs([TOKEN, CONFIG_MAP]) is False


@pytest.mark.parametrize("volume", [CLAIM, EPHEMERAL, DISK], ids=["claim", "ephemeral", "disk"])
def test_a_volume_the_filters_check_needs_it(volume: dict[str, Any]) -> None:
    assert needs([TOKEN, volume]) is True


def test_an_unreadable_volume_needs_it() -> None:
    assert needs([{"name": "data", "persistentVolumeClaim": {"claimName": 7}}]) is True
