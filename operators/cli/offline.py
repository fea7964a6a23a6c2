"""The offline commands: each computes from YAML snapshots of a cluster, with no API calls (their output:
docs/design/contracts.md)."""

from __future__ import annotations

import datetime
import os
import pathlib
import sys
from typing import Any

import click

from operators.api.errors import FieldError
from operators.cli import output
from operators.cli.common import (
    BUDGET_HELP,
    CommandError,
    descheduler_policy_option,
    filename_option,
    load,
    load_config_file,
    load_descheduler_policy,
    load_scheduler_config,
    now_option,
    output_option,
    scheduler_config_option,
)
from operators.engine.status.reconcile import reconcile


@click.command("reconcile")
@filename_option()
@output_option
@now_option
def reconcile_command(filenames: tuple[str, ...], fmt: str | None, now: datetime.datetime) -> None:
    """Print every object the controllers would write (a v1 List)."""
    snapshot = load(filenames)
    items = reconcile(snapshot, now)
    resolved = output.resolve_format(fmt)
    if resolved == "table":
        click.echo(output.reconcile_tables(items), nl=False)
    else:
        click.echo(output.dump(output.as_list(items), resolved), nl=False)


@click.command("schedule")
@filename_option()
@click.option(
    "--pod",
    "pod_ref",
    required=True,
    metavar="FILE|NAMESPACE/NAME",
    help="The pod to place: a YAML/JSON file, or a pod of the snapshot.",
)
@scheduler_config_option
@click.option("-o", "--output", "fmt", type=click.Choice(("json", "yaml")), default="json", show_default=True)
def schedule_command(filenames: tuple[str, ...], pod_ref: str, config_path: str | None, fmt: str) -> None:
    """Filter and score every node of a snapshot for one pod (kube-scheduler-simulator's JSON).

    kube-scheduler's default filters run first, in its order and words (those the configuration disables left
    out), then netaware's plugins as the configuration enables them; of kube-scheduler's scores,
    PodTopologySpread's and InterPodAffinity's are added (LeastAllocated, BalancedAllocation, ... are not).
    """
    from operators.engine.cluster.objects import Pod
    from operators.engine.scheduling.index import ClusterIndex
    from operators.engine.scheduling.schedule import schedule

    snapshot = load(filenames)
    config = load_scheduler_config(config_path)
    if "/" in pod_ref and not pathlib.Path(pod_ref).exists():
        namespace, _, name = pod_ref.partition("/")
        found = [pod for pod in snapshot.pods if pod.namespace == namespace and pod.name == name]
        if not found:
            raise CommandError(f"pod {pod_ref} is not in the snapshot")
        pod = found[0]
    else:
        pods = load((pod_ref,)).pods
        if len(pods) != 1:
            raise CommandError(f"{pod_ref}: expected exactly one Pod, found {len(pods)}")
        pod = pods[0]
    result = schedule(Pod.parse(dict(pod.raw)), ClusterIndex.build(snapshot), config)
    click.echo(output.dump(result.to_simulator_json(), fmt), nl=False)


@click.command("deschedule")
@filename_option()
@descheduler_policy_option("--policy")
@click.option(
    "--metrics",
    "metrics_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="A saved Prometheus /api/v1/query answer, for a policy whose netBandwidth usage comes from Prometheus.",
)
@click.option("-o", "--output", "fmt", type=click.Choice(("json", "yaml")), default="json", show_default=True)
@scheduler_config_option
@now_option
def deschedule_command(
    filenames: tuple[str, ...],
    policy_path: str | None,
    metrics_path: str | None,
    fmt: str,
    config_path: str | None,
    now: datetime.datetime,
) -> None:
    """Plan a descheduling cycle for a snapshot (no API calls): LowNodeLoad's node classes, usage and ordered
    evictions; with the policy's NetworkRebalance plugin, the rebalancer's moves after them (each with its gain,
    the AppGroup edge cost and the bandwidth imbalance before and after; --config: the plans' scheduler
    configuration, as the operator's --plan-config)."""
    from operators.engine.descheduling.lownodeload import EvictionPlanner, carried_out
    from operators.engine.descheduling.sources import prometheus_samples
    from operators.engine.rebalancing.rebalance import after_low_node_load
    from operators.engine.rebalancing.safety import History

    snapshot = load(filenames)
    policy = load_descheduler_policy(policy_path)
    config = load_scheduler_config(config_path)
    samples = None
    if metrics_path is not None:
        label = policy.args.usage.prometheus.node_label
        samples = load_config_file(metrics_path, lambda document: prometheus_samples(document, label))
    planner = EvictionPlanner(snapshot, policy, now, prometheus=samples)
    plan = carried_out(planner)
    document = plan.to_json()
    if policy.rebalance is not None:
        found = after_low_node_load(snapshot, policy, config, History(), now.timestamp(), planner, plan)
        document["rebalance"] = found.to_json()
    click.echo(output.dump(document, fmt), nl=False)


@click.command("simulate")
@click.option(
    "--scenario",
    default="thesis-1",
    show_default=True,
    type=click.Choice(("thesis-1", "thesis-2", "thesis-3", "thesis-4", "boutique", "random-dag")),
    help="thesis-N: bandwidth packing, default vs network-aware scheduler. boutique, random-dag: an AppGroup's "
    "pods in random arrival order, in status.topologyOrder order and released by netaware's topology-order gates, "
    "compared by network cost per dependency edge.",
)
@click.option(
    "--replicas",
    type=click.IntRange(1, 50),
    default=3,
    show_default=True,
    help="boutique, random-dag: pods per workload.",
)
@click.option(
    "--workloads", type=click.IntRange(2, 200), default=8, show_default=True, help="random-dag: workloads in the DAG."
)
@click.option(
    "--runs",
    type=click.IntRange(1, 100),
    default=5,
    show_default=True,
    help="boutique, random-dag: random arrival orders (seed, seed+1, ...) each figure is the mean of.",
)
@click.option(
    "--nodes", type=click.IntRange(1, 100_000), default=None, help="Nodes to generate (default: the scenario's 200)."
)
@click.option(
    "--pods", type=click.IntRange(0, 1_000_000), default=None, help="Network pods (default: the scenario's 1,500)."
)
@click.option(
    "--seed", type=int, default=1, show_default=True, help="Seeds the tie-breaking RNG: same seed, same result."
)
@click.option("--accounting", type=click.Choice(("duplex", "combined")), default="duplex", show_default=True)
@click.option(
    "--bandwidth-weight", type=click.IntRange(1), default=1, show_default=True, help="NetworkBandwidth score weight."
)
@click.option(
    "--percentage-of-nodes-to-score",
    type=click.IntRange(0, 100),
    default=0,
    show_default=True,
    help="kube-scheduler's setting; 0 is its adaptive default.",
)
@filename_option(required=False)
@click.option("--rebalance", is_flag=True, help="After scheduling, run the tabu-search rebalancing and report it.")
@click.option(
    "--plot", "plot_path", type=click.Path(dir_okay=False), default=None, help="Draw per-node utilisation (PNG)."
)
@click.option("-o", "--output", "fmt", type=click.Choice(("json", "yaml", "table")), default=None)
def simulate_command(
    scenario: str,
    replicas: int,
    workloads: int,
    runs: int,
    nodes: int | None,
    pods: int | None,
    seed: int,
    accounting: str,
    bandwidth_weight: int,
    percentage_of_nodes_to_score: int,
    filenames: tuple[str, ...],
    rebalance: bool,
    plot_path: str | None,
    fmt: str | None,
) -> None:
    """Schedule a thesis scenario with the default and the network-aware scheduler and compare them.

    With -f, the scenario's pods are scheduled onto the snapshot's nodes (and beside its pods).
    """
    if scenario in APPGROUP_SCENARIOS:
        given = {"--pods": pods is not None, "-f": bool(filenames), "--rebalance": rebalance, "--plot": bool(plot_path)}
        refused = [flag for flag, on in given.items() if on]
        if refused:
            raise click.UsageError(f"{', '.join(refused)}: not for the AppGroup scenario {scenario}")
        _simulate_appgroup(scenario, replicas, workloads, runs, nodes, seed, fmt)
        return
    from operators.engine.simulation import simulate as sim
    from operators.engine.simulation.cluster import Cluster
    from operators.engine.simulation.rebalance import rebalance as run_rebalance
    from operators.engine.simulation.scenarios import scenario as scenario_named

    if plot_path and not os.path.isdir(os.path.dirname(os.path.abspath(plot_path))):
        raise CommandError(f"--plot {plot_path}: the folder {os.path.dirname(plot_path) or '.'} does not exist")
    chosen = scenario_named(scenario, nodes, pods)
    shapes = sim.expand(chosen.pods)
    if filenames:
        try:
            base = Cluster.from_snapshot(load(filenames), chosen.node.bandwidth)
        except FieldError as error:
            raise CommandError(str(error)) from None
        if not base.names:
            raise CommandError(f"{', '.join(filenames)}: no Node in the snapshot to schedule onto")
    else:
        base = Cluster.generated(chosen.nodes, chosen.node)
    options = sim.Options(accounting, bandwidth_weight, percentage_of_nodes_to_score)
    results: dict[str, Any] = {}
    outcomes = {}
    show_progress = sys.stderr.isatty() and len(shapes) * len(base.names) > 2_000_000
    for name in sim.SCHEDULERS:
        network_aware = name == "network-aware"
        if show_progress:  # long runs on a terminal only; machines get clean output
            with click.progressbar(length=len(shapes), label=f"{name:>13}", file=sys.stderr) as bar:
                outcome = sim.run_scheduler(base.copy(), shapes, network_aware, options, seed, bar.update)
        else:
            outcome = sim.run_scheduler(base.copy(), shapes, network_aware, options, seed)
        outcomes[name] = outcome
        results[name] = sim.report(outcome, accounting)
        if rebalance:
            results[name]["rebalance"] = run_rebalance(outcome.cluster, shapes, accounting).to_json()
    document = {"scenario": scenario, "seed": seed, "accounting": accounting, "results": results}
    if plot_path:
        from operators.cli.plot import utilisation_plot

        try:
            utilisation_plot(
                {name: sim.percent_utilisation(outcome.cluster, accounting) for name, outcome in outcomes.items()},
                f"{scenario}, {accounting} accounting, seed {seed}",
                plot_path,
            )
        except (OSError, ValueError) as error:  # not writable, unknown image format
            raise CommandError(f"--plot {plot_path}: {error}") from None
    resolved = output.resolve_format(fmt)
    if resolved == "table":
        keys = ("scheduled", "pending", "overcommittedNodes", "objective", "podsPerSecond")
        rows = [(name, *(str(results[name][key]) for key in keys)) for name in results]
        click.echo(output.table(("scheduler", *keys), rows), nl=False)
    else:
        click.echo(output.dump(document, resolved), nl=False)


APPGROUP_SCENARIOS = ("boutique", "random-dag")


def _simulate_appgroup(
    scenario: str, replicas: int, workloads: int, runs: int, nodes: int | None, seed: int, fmt: str | None
) -> None:
    """An AppGroup scenario on 2 regions x 2 zones (``nodes`` spread over them, default 16)."""
    import random

    from operators.engine.simulation import ordered

    cluster = ordered.zoned_cluster(nodes_per_zone=max((nodes or 16) // 4, 1))
    if scenario == "boutique":
        chosen = ordered.boutique(replicas, cluster)
    else:
        graph = ordered.random_dag(workloads, 0.3, random.Random(seed))
        chosen = ordered.app_scenario("random-dag", graph, replicas, cluster)
    results = ordered.compare(chosen, runs, seed)
    document = {"scenario": scenario, "seed": seed, "runs": runs, "pods": len(chosen.pods), "results": results}
    resolved = output.resolve_format(fmt)
    if resolved == "table":
        keys = ("meanCost", "p90Cost", "withinMaxNetworkCost", "unscheduled")
        rows = [(order, *(str(results[order][key]) for key in keys)) for order in results]
        click.echo(output.table(("order", *keys), rows), nl=False)
    else:
        click.echo(output.dump(document, resolved), nl=False)


@click.command("topology")
@filename_option()
@click.option(
    "--name", "topology_name", default=None, help="The NetworkTopology, NAMESPACE/NAME or NAME (default: the only one)."
)
@click.option(
    "--weights",
    default=None,
    help="Which weights to show (default: NetperfCosts when the measurements give any, else UserDefined).",
)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None, help="Draw the costs (PNG).")
@output_option
@now_option
def topology_command(
    filenames: tuple[str, ...],
    topology_name: str | None,
    weights: str | None,
    plot_path: str | None,
    fmt: str | None,
    now: datetime.datetime,
) -> None:
    """The zone and region costs the NetworkTopology controller computes from a snapshot (its netperf
    ConfigMaps included), and with --plot a heat map of them beside the measured node pairs ordered by zone.
    """
    from operators.engine.status.netperf import netperf_config_maps, node_pairs
    from operators.engine.status.networktopology import networktopology_result

    snapshot = load(filenames)
    candidates = [
        nt
        for nt in snapshot.network_topologies
        if topology_name in (None, nt.metadata.name, f"{nt.metadata.namespace}/{nt.metadata.name}")
    ]
    if len(candidates) != 1:
        found = ", ".join(f"{nt.metadata.namespace}/{nt.metadata.name}" for nt in snapshot.network_topologies)
        wanted = f"--name {topology_name}" if topology_name else "one NetworkTopology (pass --name)"
        raise CommandError(f"{', '.join(filenames)}: expected {wanted}; found: {found or 'none'}")
    topology = networktopology_result(candidates[0], snapshot, now).topology
    by_name = {
        weight.name: {
            entry.topology_key: {
                origin.origin: {cost.destination: cost.network_cost for cost in origin.cost_list or ()}
                for origin in entry.origin_list
            }
            for entry in weight.topology_list
        }
        for weight in topology.spec.weights
    }
    chosen = weights or next((name for name in ("NetperfCosts", "UserDefined") if by_name.get(name)), None)
    if chosen not in by_name:
        raise CommandError(f"--weights {chosen}: not in the NetworkTopology (it has {', '.join(by_name) or 'none'})")
    maps = netperf_config_maps(
        snapshot.config_maps, topology.metadata.namespace, topology.metadata.name, topology.spec.configmap_name
    )
    pairs = node_pairs(maps, {node.name for node in snapshot.nodes})
    status = topology.status
    document = {
        "topology": f"{topology.metadata.namespace}/{topology.metadata.name}",
        "weights": chosen,
        "costs": by_name[chosen],
        "nodePairsMeasured": len(pairs),
        "missingCosts": [m.to_wire() for m in (status.missing_costs or ())] if status else [],
    }
    if plot_path:
        from operators.cli.plot import topology_plot

        zones = {node.name: node.zone for node in snapshot.nodes}
        try:
            topology_plot(by_name[chosen], pairs, zones, f"{document['topology']} ({chosen})", plot_path)
        except (OSError, ValueError) as error:
            raise CommandError(f"--plot {plot_path}: {error}") from None
    resolved = output.resolve_format(fmt)
    if resolved == "table":
        rows = [
            (key.rsplit("/", 1)[-1], origin, destination, str(cost))
            for key, origins in sorted(by_name[chosen].items())
            for origin, costs in sorted(origins.items())
            for destination, cost in sorted(costs.items())
        ]
        click.echo(output.table(("level", "origin", "destination", "cost"), rows), nl=False)
    else:
        click.echo(output.dump(document, resolved), nl=False)


@click.command("plan")
@filename_option()
@click.option("--appgroup", "group_ref", required=True, metavar="NAMESPACE/NAME", help="The AppGroup to place.")
@click.option("--budget-ms", type=click.IntRange(1, 600_000), default=100, show_default=True, help=BUDGET_HELP)
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=0, show_default=True, help="Seed of tie-breaks.")
@click.option(
    "--exact",
    "exact_seconds",
    type=click.FloatRange(0.1, 3600),
    default=None,
    metavar="SECONDS",
    help="Also solve exactly (HiGHS, the `exact` extra) within SECONDS: the optimum, or the best bound.",
)
@scheduler_config_option
@output_option
@now_option
def plan_command(
    filenames: tuple[str, ...],
    group_ref: str,
    budget_ms: int,
    seed: int,
    exact_seconds: float | None,
    config_path: str | None,
    fmt: str | None,
    now: datetime.datetime,
) -> None:
    """Place an AppGroup's unbound pods as a whole at a low network cost (pod -> node, cost per edge), the plan
    the AppGroup controller releases pods by, against a lower bound computed without a solver; with --exact,
    against the optimum or the solver's best bound."""
    from operators.engine.planning.plan import plan_appgroup
    from operators.engine.planning.program import MissingSolver
    from operators.engine.scheduling.index import ClusterIndex

    snapshot = load(filenames)
    config = load_scheduler_config(config_path)
    namespace, _, name = group_ref.partition("/")
    found = [g for g in snapshot.app_groups if (g.metadata.namespace, g.metadata.name) == (namespace, name)]
    if not name or not found:
        known = ", ".join(f"{g.metadata.namespace}/{g.metadata.name}" for g in snapshot.app_groups) or "none"
        raise CommandError(f"--appgroup {group_ref}: not an AppGroup of the snapshot (it has: {known})")
    try:
        result = plan_appgroup(
            ClusterIndex.build(snapshot),
            found[0],
            config,
            seed,
            budget_ms / 1000,
            now,
            exact_seconds=exact_seconds,
            bound=True,
        )
    except MissingSolver as error:
        raise CommandError(f"--exact: {error}") from None
    resolved = output.resolve_format(fmt)
    if resolved != "table":
        click.echo(output.dump(result.to_json(), resolved), nl=False)
        return
    rows = [(pod.pod, pod.workload, pod.node, pod.zone, pod.region) for pod in result.pods]
    rows += [(pod, "", "(none)", why, "") for pod, why in sorted(result.unplaceable.items())]
    click.echo(output.table(("pod", "workload", "node", "zone", "region"), rows), nl=False)
    edges = [(e.source, e.target, str(e.pairs), str(e.cost), f"{e.mean:.2f}", str(e.over_limit)) for e in result.edges]
    click.echo(output.table(("source", "target", "pairs", "cost", "mean", "over max"), edges), nl=False)
    summary = f"cost {result.cost.cost} (greedy start {result.greedy.cost})"
    summary += f", spread penalty {result.cost.spread_penalty}" * bool(result.cost.spread_penalty)
    summary += f", mean per edge {result.mean_edge_cost():.2f}"
    if result.reference is not None:
        kind = "optimum" if result.reference.optimal else "best bound"
        summary += f"; {kind} {result.reference.bound:g}, ratio {result.ratio:.3f}"
    click.echo(summary)
