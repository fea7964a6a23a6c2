"""`netaware explain`: why a pod went where it went (or nowhere), from a live cluster or a snapshot. Installed as
`kubectl-netaware` too, so `kubectl netaware explain pod NS/NAME` uses kubectl's current context."""

from __future__ import annotations

import datetime
from typing import Any

import click

from operators.cli import output
from operators.cli.common import (
    CommandError,
    cluster_source_options,
    load,
    load_scheduler_config,
    scheduler_config_option,
)

LIVE_TIMEOUT = 30.0


_source_options = cluster_source_options("Explain from a snapshot (YAML files or folders) instead of the cluster.")


def _snapshot(filenames: tuple[str, ...], kubeconfig: str | None, server: str | None, kinds: tuple[Any, ...]) -> Any:
    """The snapshot of ``-f`` files, else the cluster's, listed once through the live components' cache."""
    import asyncio

    from operators import compose
    from operators.kube import NoCredentials

    source = compose.ClusterSource(load(filenames) if filenames else None, server, kubeconfig)

    async def listed() -> Any:
        async with asyncio.timeout(LIVE_TIMEOUT):
            return await compose.snapshot_of(source, kinds)

    try:
        return asyncio.run(listed())
    except NoCredentials as error:
        raise CommandError(f"{error}, or -f PATH (explain from a snapshot)") from None
    except TimeoutError:
        raise CommandError(f"the cluster did not list what the explanation needs within {LIVE_TIMEOUT:g} s") from None


@click.group("explain")
def explain_group() -> None:
    """Explain placements: why a pod went where it went, or why it is pending."""


@explain_group.command("pod")
@click.argument("reference", metavar="[NAMESPACE/]NAME")
@click.option("-n", "--namespace", default="default", show_default=True, help="When the reference has none.")
@_source_options
@scheduler_config_option
@click.option("-o", "--output", "fmt", type=click.Choice(("json", "yaml", "table")), default="table", show_default=True)
def explain_pod_command(
    reference: str,
    namespace: str,
    filenames: tuple[str, ...],
    kubeconfig: str | None,
    server: str | None,
    config_path: str | None,
    fmt: str,
) -> None:
    """Filter and score every node for a pod as the extender does: per node the verdict of each filter and
    each plugin's raw, normalised and weighted score, the node chosen, and for a pod no node fits, why (one
    line per plugin). JSON and YAML have the shape of `netaware schedule`, plus `whyNot`.
    """
    from operators.engine.cluster.objects import Pod
    from operators.engine.scheduling.explain import unavailable, why_not
    from operators.engine.scheduling.index import ClusterIndex
    from operators.engine.scheduling.schedule import schedule
    from operators.extender.live import KINDS
    from operators.sources.kinds import FILTER_KINDS

    pod_namespace, _, name = reference.rpartition("/")
    pod_namespace = pod_namespace or namespace
    config = load_scheduler_config(config_path)
    snapshot = _snapshot(filenames, kubeconfig, server, (*KINDS, *FILTER_KINDS))  # what kube-scheduler's filters read
    found = next((p for p in snapshot.pods if p.namespace == pod_namespace and p.name == name), None)
    if found is None:
        raise CommandError(f"pod {pod_namespace}/{name} not found")
    result = schedule(Pod.parse(dict(found.raw)), ClusterIndex.build(snapshot), config)
    reasons = why_not(result)
    message = unavailable(result)
    if fmt != "table":
        click.echo(
            output.dump({**result.to_simulator_json(), "whyNot": reasons, "unavailable": message}, fmt), nl=False
        )
        return
    plugins = sorted({plugin for scores in result.normalized.values() for plugin in scores})
    rows = []
    for node in sorted(result.filters):
        failed = [f"{plugin}: {verdict}" for plugin, verdict in result.filters[node].items() if verdict != "passed"]
        scores = [
            f"{result.raw[node][p]} / {result.normalized[node][p]} / {result.final[node][p]}"
            if node in result.raw
            else "-"
            for p in plugins
        ]
        total = str(result.total.get(node, "-"))
        mark = "*" if node == result.selected else ""
        rows.append((f"{node}{mark}", "; ".join(failed) or "passed", *scores, total))
    click.echo(f"pod {result.pod}: " + (f"{result.selected} (*)" if result.selected else "no node fits"))
    click.echo("per node: the filters' verdict, each plugin's raw / normalised / weighted score, the total")
    click.echo(output.table(("node", "filters", *plugins, "total"), rows), nl=False)
    if message:
        click.echo(f"kube-scheduler: {message}")
    for line in reasons:
        click.echo(f"why not: {line}")


@explain_group.command("appgroup")
@click.argument("reference", metavar="[NAMESPACE/]NAME")
@click.option("-n", "--namespace", default="default", show_default=True, help="When the reference has none.")
@_source_options
@scheduler_config_option
@click.option("-o", "--output", "fmt", type=click.Choice(("json", "yaml", "table")), default="table", show_default=True)
def explain_appgroup_command(
    reference: str,
    namespace: str,
    filenames: tuple[str, ...],
    kubeconfig: str | None,
    server: str | None,
    config_path: str | None,
    fmt: str,
) -> None:
    """An AppGroup as placed now: its topology order, where each workload's pods run, and the network cost of
    each dependency edge over its placed pod pairs (mean, worst, pairs over maxNetworkCost); for pods released by
    a whole-group plan, the mean each edge has where the plan put them, and how many followed the plan; the
    rebalancer's moves that touched it (from, to, the edge cost before and after) and its layout."""
    from operators.api import keys
    from operators.api.meta import format_time
    from operators.engine.planning.layout import rebalancing_of
    from operators.engine.scheduling.explain import dependency_pair_costs
    from operators.engine.scheduling.index import ClusterIndex
    from operators.engine.status.appgroup import member_pods, placements, plan_status
    from operators.sources.kinds import APPGROUPS, NETWORKTOPOLOGIES, NODES, PODS

    group_namespace, _, name = reference.rpartition("/")
    group_namespace = group_namespace or namespace
    config = load_scheduler_config(config_path)
    snapshot = _snapshot(filenames, kubeconfig, server, (NODES, PODS, APPGROUPS, NETWORKTOPOLOGIES))
    group = next(
        (g for g in snapshot.app_groups if (g.metadata.namespace, g.metadata.name) == (group_namespace, name)), None
    )
    if group is None:
        raise CommandError(f"AppGroup {group_namespace}/{name} not found")
    nodes = snapshot.node_by_name
    members = member_pods(group, snapshot)
    where = placements(group, members, snapshot)
    placed = [(workload.selector, pod.node) for workload in where for pod in workload.pods if pod.node]
    costs = ClusterIndex.build(snapshot).cost_map(config.overhead)
    pairs = dependency_pair_costs(group, placed, nodes, costs or {})
    edges: dict[tuple[str, str], list[Any]] = {}
    for pair in pairs:
        edges.setdefault((pair.workload, pair.dependency), []).append(pair)
    # members released by a whole-group plan: the same edges where the plan put them (planned versus actual)
    intended = [
        (pod.labels.get(keys.APPGROUP_WORKLOAD_LABEL, ""), pod.annotations.get(keys.PLANNED_NODE) or pod.node_name)
        for pod in members
        if pod.annotations.get(keys.PLANNED_NODE) or pod.node_name
    ]
    plan = plan_status(group, members)
    planned_edges: dict[tuple[str, str], list[Any]] = {}
    if plan is not None:
        for pair in dependency_pair_costs(group, intended, nodes, costs or {}):
            planned_edges.setdefault((pair.workload, pair.dependency), []).append(pair)
    order = sorted((group.status.topology_order or []) if group.status else [], key=lambda entry: entry.index)
    document: dict[str, Any] = {
        "appGroup": f"{group_namespace}/{name}",
        "order": [entry.workload.selector for entry in order],
        "networkTopology": config.overhead.network_topology_name if costs is not None else None,
        "placements": {
            workload.selector: [
                {"pod": f"{pod.namespace}/{pod.name}", "node": pod.node, "zone": pod.zone} for pod in workload.pods
            ]
            for workload in where
        },
        "edges": [
            {
                "workload": workload,
                "dependency": dependency,
                "maxNetworkCost": found[0].limit,
                "pairs": len(found),
                "meanCost": round(sum(p.cost for p in found) / len(found), 2),
                "worstCost": max(p.cost for p in found),
                "pairsOverMaxNetworkCost": sum(not p.within for p in found),
                **({"plannedMeanCost": _mean(planned_edges.get((workload, dependency)))} if plan else {}),
            }
            for (workload, dependency), found in edges.items()
        ],
    }  # fmt: skip
    if plan is not None:
        document["plan"] = plan.to_wire()
    rebalancing = rebalancing_of(group)
    if rebalancing is not None:
        until = format_time(datetime.datetime.fromtimestamp(rebalancing.until, datetime.UTC))
        document["rebalance"] = {"layoutUntil": until, "layout": rebalancing.layout, "moves": list(rebalancing.moves)}
    elif keys.REBALANCE in (group.metadata.annotations or {}):
        document["rebalance"] = {"unreadable": f"annotation {keys.REBALANCE} is not the rebalancer's JSON: ignored"}
    if fmt != "table":
        click.echo(output.dump(document, fmt), nl=False)
        return
    click.echo(f"AppGroup {document['appGroup']}: topology order {' -> '.join(document['order']) or '(none yet)'}")
    if costs is None:
        click.echo(f"no NetworkTopology {config.overhead.network_topology_name}: every cost below is unknown (100)")
    click.echo("where each workload's pods run:")
    rows = [
        (workload, item["pod"], item["node"] or "(pending)", item["zone"] or "-")
        for workload, items in document["placements"].items()
        for item in items
    ]
    click.echo(output.table(("workload", "pod", "node", "zone"), rows), nl=False)
    click.echo("each dependency edge over its placed pod pairs (cost: same node 0, same zone 1, else the topology's):")
    edge_rows: list[tuple[str, ...]] = [
        (f"{e['workload']} -> {e['dependency']}", str(e["maxNetworkCost"] if e["maxNetworkCost"] is not None else "-"),
         str(e["pairs"]), str(e["meanCost"]), str(e["worstCost"]), str(e["pairsOverMaxNetworkCost"]))
        for e in document["edges"]
    ]  # fmt: skip
    headers: tuple[str, ...] = ("edge", "maxNetworkCost", "pairs", "mean cost", "worst", "over max")
    if plan is not None:
        headers += ("planned mean",)
        edge_rows = [(*row, str(e["plannedMeanCost"])) for row, e in zip(edge_rows, document["edges"], strict=True)]
    click.echo(output.table(headers, edge_rows), nl=False)
    if plan is not None:
        click.echo(f"by plan: {plan.planned} pods planned, {plan.on_plan} bound where planned, {plan.off_plan} "
                   f"elsewhere, {plan.pending} not bound yet")  # fmt: skip
    if "rebalance" in document:
        _echo_moves(document["rebalance"])


def _echo_moves(rebalance: dict[str, Any]) -> None:
    """The rebalancer's moves that touched the AppGroup (its annotation), newest last."""
    if "unreadable" in rebalance:
        click.echo(f"rebalancer: {rebalance['unreadable']}")
        return
    click.echo(f"moved by the rebalancer (its layout holds until {rebalance['layoutUntil']}):")
    rows = []
    for move in rebalance["moves"]:
        cost = move.get("cost") or {}
        rows.append((str(move.get("at", "")), str(move.get("pod", "")), str(move.get("from", "")),
                     str(move.get("to", "")), f"{cost.get('before', '')} -> {cost.get('after', '')}",
                     str(move.get("gain", ""))))  # fmt: skip
    click.echo(output.table(("at", "pod", "from", "to", "edge cost", "gain"), rows), nl=False)


def _mean(pairs: list[Any] | None) -> float | None:
    return round(sum(p.cost for p in pairs) / len(pairs), 2) if pairs else None


@explain_group.command("node")
@click.argument("name")
@_source_options
@scheduler_config_option
@click.option("--policy", "policy_path", type=click.Path(dir_okay=False), default=None,
              help="DeschedulerConfiguration (default: netBandwidth low 30 %, high 70 %).")  # fmt: skip
@click.option("-o", "--output", "fmt", type=click.Choice(("json", "yaml", "table")), default="table", show_default=True)
def explain_node_command(
    name: str,
    filenames: tuple[str, ...],
    kubeconfig: str | None,
    server: str | None,
    config_path: str | None,
    policy_path: str | None,
    fmt: str,
) -> None:
    """A node's bandwidth as netaware sees it: the capacity and where it comes from, what its pods request
    and what is free per direction, its NodeSLO's network QoS classes, and the descheduler's class for it."""
    import datetime

    from operators.api.errors import FieldError
    from operators.cli.common import load_descheduler_policy
    from operators.engine.cluster.bandwidth import node_capacity
    from operators.engine.descheduling.lownodeload import plan
    from operators.engine.descheduling.sources import Requests
    from operators.engine.scheduling.explain import bits
    from operators.engine.scheduling.index import ClusterIndex
    from operators.engine.status.node_bandwidth import advertised
    from operators.extender.live import KINDS

    config = load_scheduler_config(config_path)
    policy = load_descheduler_policy(policy_path)
    snapshot = _snapshot(filenames, kubeconfig, server, KINDS)
    node = snapshot.node_by_name.get(name)
    if node is None:
        raise CommandError(f"node {name} not found")
    index = ClusterIndex.build(snapshot)

    try:
        capacity = node_capacity(node, index.slo_totals.get(name), config.bandwidth.default_node_bandwidth)
    except FieldError as error:
        raise CommandError(f"node {name}: {error}") from None
    used_in, used_out = index.used.get(name, (0, 0))
    total = capacity.bits if capacity else None
    slo = next((s for s in snapshot.node_slos if s.metadata.name == name), None)
    qos = slo.status.network_qos if slo is not None and slo.status is not None else None
    planned = plan(snapshot, policy, datetime.datetime.now(datetime.UTC)).to_json()
    classified = (planned.get("nodes") or {}).get(name, {})
    running = tuple(pod for pod in snapshot.pods_by_node.get(name, ()) if not pod.is_terminal)
    accounted = {  # kube-scheduler's count: the descheduler's Requests source counts requests as it does
        resource: {"allocatable": amount, "requested": Requests(resource).node_usage(node, running)}
        for resource, amount in advertised(node).items()
    }
    document = {
        "node": name,
        "zone": node.zone or None,
        "region": node.region or None,
        "capacity": {"bitsPerSecond": total, "source": capacity.source if capacity else None},
        "requested": {"ingress": used_in, "egress": used_out},
        "free": {"ingress": total - used_in, "egress": total - used_out} if total is not None else None,
        "networkQOS": qos.model_dump(by_alias=True, exclude_none=True, mode="json") if qos is not None else None,
        "descheduler": classified or None,
        # what kube-scheduler accounts (the bandwidth guarantee): allocatable less its pods' requests
        "extendedResources": accounted or None,
    }
    if fmt != "table":
        click.echo(output.dump(document, fmt), nl=False)
        return
    where = f"zone {node.zone or '-'}, region {node.region or '-'}"
    click.echo(f"node {name} ({where})")
    if total is None:
        click.echo("capacity: unknown (no annotation, NodeSLO or default): NetworkBandwidth rejects it")
    else:
        click.echo(f"capacity: {bits(total)} bits/s per direction, from {capacity.source if capacity else '-'}")
        rows = [
            (direction, f"{bits(used)} bits/s", f"{bits(total - used)} bits/s", f"{100 * used / total:.1f} %")
            for direction, used in (("ingress", used_in), ("egress", used_out))
        ]
        click.echo(output.table(("direction", "requested", "free", "used"), rows), nl=False)
    for resource, amounts in accounted.items():
        left = amounts["allocatable"] - amounts["requested"]
        click.echo(
            f"kube-scheduler accounts {resource}: allocatable {bits(amounts['allocatable'])}, requested "
            f"{bits(amounts['requested'])}, free {bits(left)} bits/s"
        )
    click.echo(f"NodeSLO network QoS: {document['networkQOS'] or '(none)'}")
    if classified:
        usage = ", ".join(f"{resource} {value:.2f} %" for resource, value in classified.get("usage", {}).items())
        click.echo(f"descheduler (LowNodeLoad): {classified.get('class')} ({usage})")
