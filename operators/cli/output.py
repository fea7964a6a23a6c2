"""Rendering command results: ``-o json|yaml|table`` (table by default on a terminal)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from operators.text import table

__all__ = ["FORMATS", "as_list", "dump", "reconcile_tables", "resolve_format", "table"]

FORMATS = ("json", "yaml", "table")


def resolve_format(requested: str | None) -> str:
    if requested:
        return requested
    return "table" if sys.stdout.isatty() else "yaml"


def dump(document: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(document, indent=2, sort_keys=False) + "\n"
    return yaml.safe_dump(document, sort_keys=False, width=120)


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``v1 List``, as ``kubectl get -o yaml`` writes several objects."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def _ready(status: dict[str, Any]) -> str:
    ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    if ready is None:
        return "-"
    return "True" if ready.get("status") == "True" else f"False ({ready.get('reason')})"


def reconcile_tables(items: Sequence[dict[str, Any]]) -> str:
    """What the controllers would write, one table per kind, each under a line saying what it shows."""
    sections = []
    rows: list[tuple[str, ...]]
    groups = [item for item in items if item["kind"] == "AppGroup"]
    if groups:
        rows = []
        for item in groups:
            status = item.get("status") or {}
            order = sorted(status.get("topologyOrder") or (), key=lambda entry: entry["index"])
            rows.append(
                (
                    f"{item['metadata'].get('namespace', '')}/{item['metadata']['name']}",
                    str(item["spec"].get("topologySortingAlgorithm", "-")),
                    " -> ".join(entry["workload"]["selector"] for entry in order) or "-",
                    str(status.get("runningWorkloads", 0)),
                    _ready(status),
                )
            )
        sections.append(
            "AppGroups: topology order (a workload before those it depends on) and running pods\n"
            + table(("appgroup", "algorithm", "order", "running", "ready"), rows)
        )
    topologies = [item for item in items if item["kind"] == "NetworkTopology"]
    if topologies:
        rows = [
            (
                f"{item['metadata'].get('namespace', '')}/{item['metadata']['name']}",
                str((item.get("status") or {}).get("nodeCount", 0)),
                str(len((item.get("status") or {}).get("missingCosts") or ())),
                _ready(item.get("status") or {}),
            )
            for item in topologies
        ]
        sections.append(
            "NetworkTopologies: nodes seen and zone or region pairs without a measured cost\n"
            + table(("networktopology", "nodes", "missing costs", "ready"), rows)
        )
    slos = [item for item in items if item["kind"] == "NodeSLO"]
    if slos:
        rows = []
        for item in slos:
            qos = (item.get("status") or {}).get("networkQOS") or {}
            rows.append(
                (
                    str(item["metadata"]["name"]),
                    f"{qos.get('totalNetworkBandwidth', '-')} bits/s",
                    str(qos.get("totalSource", "-")),
                    ", ".join(qos.get("classes") or {}) or "-",
                )
            )
        sections.append(
            "NodeSLOs: each node's network bandwidth, where it comes from, and its QoS classes\n"
            + table(("node", "total", "source", "classes"), rows)
        )
    return "\n".join(sections)
