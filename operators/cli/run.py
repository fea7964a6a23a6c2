"""``netaware run``: the controllers and the descheduler against a cluster, with leader election, probes and the
API retry settings; flags only — the runtime (:mod:`operators.runtime`) does the work."""

from __future__ import annotations

import os
from typing import Any

import click

from operators.cli.common import (
    BUDGET_HELP,
    CommandError,
    accounting_mode_option,
    bandwidth_value,
    descheduler_policy_option,
    load_descheduler_policy,
    load_scheduler_config,
    log_format_option,
)
from operators.cli.signals import run_until_signal


def _components(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, ...]:
    from operators.runtime import ALL_COMPONENTS

    names = tuple(name.strip() for name in value.split(",") if name.strip())
    unknown = [name for name in names if name not in ALL_COMPONENTS]
    if unknown or not names:
        raise click.BadParameter(f"{value!r}: expected a comma-separated list of {', '.join(ALL_COMPONENTS)}")
    return names


@click.command("run")
@click.option(
    "--components",
    default="appgroup,networktopology,nodeslo",
    show_default=True,
    callback=_components,
    help="Comma-separated: appgroup, networktopology, nodeslo, nodebandwidth (nodes advertise bandwidth as "
    "extended resources, for kube-scheduler to account), descheduler.",
)
@descheduler_policy_option("--descheduler-policy")
@click.option(
    "--server",
    default=None,
    metavar="URL",
    help="A plain-HTTP API server (the embedded emulator). Default: in-cluster credentials, else the kubeconfig.",
)
@click.option("--health-address", default="0.0.0.0", show_default=True, help="Address of /healthz, /readyz, /metrics.")
@click.option(
    "--health-port",
    default=8080,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port of /healthz, /readyz and /metrics (0: none).",
)
@click.option(
    "--leader-elect/--no-leader-elect",
    default=True,
    show_default=True,
    help="Hold a coordination.k8s.io/v1 Lease before running anything (safe with several replicas).",
)
@click.option(
    "--leader-election-namespace",
    default=lambda: os.environ.get("POD_NAMESPACE", "default"),
    show_default="$POD_NAMESPACE or default",
    help="Namespace of the Lease.",
)
@click.option("--leader-election-id", default="netaware", show_default=True, help="Name of the Lease.")
@click.option(
    "--leader-election-identity",
    default=None,
    help="This replica's name in the Lease (default: the host name and a random suffix).",
)
@click.option("--lease-duration", default=15, show_default=True, type=click.IntRange(min=2), help="Seconds.")
@click.option("--renew-deadline", default=10.0, show_default=True, type=click.FloatRange(min=1), help="Seconds.")
@click.option("--retry-period", default=2.0, show_default=True, type=click.FloatRange(min=1), help="Seconds.")
@click.option(
    "--warm-standby/--no-warm-standby",
    default=True,
    show_default=True,
    help="With leader election, followers list and watch the cluster too (ready once synced), so a new leader decides "
    "within seconds of taking the Lease; without, a new leader lists the cluster first.",
)
@log_format_option()
@click.option(
    "-n",
    "--namespace",
    "namespaces",
    multiple=True,
    help="Handle AppGroups and NetworkTopologies of this namespace only (repeatable; default: all namespaces).",
)
@click.option("-A", "--all-namespaces", is_flag=True, help="Every namespace (the default; conflicts with --namespace).")
@click.option(
    "--api-error-backoffs",
    default="1,1,2,3,5,8,13,21",
    show_default=True,
    metavar="SECONDS,...",
    help="Delays between the controllers' retries of a failed API call; when they are used up the "
    "process releases its Lease and exits non-zero (Kubernetes restarts it).",
)
@click.option(
    "--nodeslo-spec-owner",
    type=click.Choice(("netaware", "koordinator")),
    default="netaware",
    show_default=True,
    help="netaware: write the network-QoS fields of each NodeSLO's spec (and create NodeSLOs); every other "
    "field is left as found. koordinator: Koordinator's slo-controller owns the NodeSLOs; write the status only.",
)
@click.option(
    "--appgroup-status-interval",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    metavar="SECONDS",
    help="At most one status write per AppGroup per interval (the latest state is written at its end).",
)
@click.option(
    "--appgroup-status-writes-per-second",
    type=click.FloatRange(min=0),
    default=20.0,
    show_default=True,
    metavar="RATE",
    help="At most this many AppGroup status writes a second in all, the AppGroups marked longest first; 0: no "
    "limit. A burst of AppGroups otherwise writes about as many statuses as it binds pods.",
)
@click.option(
    "--ordered-scheduling-timeout",
    type=click.FloatRange(min=0, min_open=True, max=86400),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Release a pod held by the topology-order gate this long after its creation, whatever the order "
    "(an AppGroup's annotation netaware.io/ordered-scheduling-timeout overrides it).",
)
@click.option(
    "--appgroup-plans/--no-appgroup-plans",
    default=False,
    show_default=True,
    help="Release the gated pods of AppGroups annotated netaware.io/ordered-scheduling: plan by a whole-group "
    "plan, each to its planned node (the cache then follows every pod and the NetworkTopologies); off, such "
    "AppGroups are released dependencies first.",
)
@click.option(
    "--plan-config",
    "plan_config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="The KubeSchedulerConfiguration whose NetworkOverhead and NetworkBandwidth arguments the plans follow "
    "(the extender's; default: their defaults).",
)
@click.option(
    "--plan-affinity",
    type=click.Choice(("required", "preferred")),
    default="required",
    show_default=True,
    help="How a pod released by a plan carries its planned node: a required node affinity (kube-scheduler must "
    "follow it; a pod whose node fills first is evicted and replanned) or a preferred one of weight 100.",
)
@click.option(
    "--plan-window-ms",
    type=click.IntRange(1, 10_000),
    default=1000,
    show_default=True,
    help="A group's first gated pods are planned once every workload has a pod and none arrived for 50 ms, or, "
    "while a workload has none, once none arrived for this long (at most 30 s after the first); later arrivals are "
    "planned against the placed ones.",
)
@click.option(
    "--plan-budget-ms",
    type=click.IntRange(1, 60_000),
    default=100,
    show_default=True,
    help=BUDGET_HELP + " When N AppGroups wait to be planned together, each gets at most 500 ms / N; while they "
    "keep arriving, the plans of the last 2 s and those waiting share 300 ms a second (not below 10 ms, nor below "
    "5 ms past building the problem), so a burst is planned at the pace it arrives and leaves the API server its CPU.",
)
@accounting_mode_option(
    "nodebandwidth: duplex advertises netaware.io/ingress-bandwidth and netaware.io/egress-bandwidth, each the "
    "node's capacity; combined advertises netaware.io/bandwidth for ingress + egress (match the webhook's)."
)
@click.option(
    "--default-node-bandwidth",
    default=None,
    metavar="QUANTITY",
    callback=bandwidth_value,
    help="nodebandwidth: the capacity (bits/s) of a node with no annotation or NodeSLO total "
    "(default: none; such a node advertises 0 and gets a Warning Event).",
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    default=None,
    help="Kubeconfig to use (default: in-cluster, else $KUBECONFIG or ~/.kube/config).",
)
def run_command(
    components: tuple[str, ...],
    policy_path: str | None,
    server: str | None,
    health_address: str,
    health_port: int,
    leader_elect: bool,
    leader_election_namespace: str,
    leader_election_id: str,
    leader_election_identity: str | None,
    lease_duration: int,
    renew_deadline: float,
    retry_period: float,
    warm_standby: bool,
    log_format: str,
    namespaces: tuple[str, ...],
    all_namespaces: bool,
    api_error_backoffs: str,
    nodeslo_spec_owner: str,
    appgroup_status_interval: float,
    appgroup_status_writes_per_second: float,
    ordered_scheduling_timeout: float,
    appgroup_plans: bool,
    plan_config_path: str | None,
    plan_affinity: str,
    plan_window_ms: int,
    plan_budget_ms: int,
    accounting_mode: str,
    default_node_bandwidth: Any,
    kubeconfig: str | None,
) -> None:
    """Run the controllers (and the descheduler) against a cluster until SIGTERM.

    With leader election (the default) only the holder of the Lease runs them; a follower, its cache kept in sync,
    takes over within the lease duration when the leader dies, at once when it stops gracefully.
    """
    import aiohttp
    from kubernetes_asyncio.client.exceptions import ApiException

    from operators.api.config.controllers import (
        AppGroupOptions,
        ControllerOptions,
        NodeBandwidthOptions,
        NodeSLOOptions,
    )
    from operators.election import LeaderElectionOptions
    from operators.kube import NoCredentials
    from operators.runtime import DESCHEDULER, ComponentFailed, RunOptions, run

    if not lease_duration > renew_deadline > 1.2 * retry_period:
        raise click.BadParameter(
            f"need --lease-duration > --renew-deadline > 1.2 x --retry-period "
            f"(got {lease_duration:g}, {renew_deadline:g}, {retry_period:g})"
        )
    if namespaces and all_namespaces:
        raise click.UsageError("--namespace and --all-namespaces exclude each other")
    policy = load_descheduler_policy(policy_path) if DESCHEDULER in components else None
    election = (
        LeaderElectionOptions(
            leader_election_namespace,
            leader_election_id,
            **({"identity": leader_election_identity} if leader_election_identity else {}),
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            retry_period=retry_period,
        )
        if leader_elect
        else None
    )
    options = RunOptions(
        components,
        server=server,
        policy=policy,
        health_address=health_address,
        health_port=health_port or None,
        leader_election=election,
        warm_standby=warm_standby,
        signals=True,
        namespaces=namespaces,
        api_error_backoffs=_backoffs(api_error_backoffs),
        kubeconfig=kubeconfig,
        controllers=ControllerOptions(
            appgroup=AppGroupOptions(
                status_interval_seconds=appgroup_status_interval,
                status_writes_per_second=appgroup_status_writes_per_second,
                gate_timeout_seconds=ordered_scheduling_timeout,
                plans=appgroup_plans,
                plan_config=load_scheduler_config(plan_config_path),
                plan_budget_seconds=plan_budget_ms / 1000,
                plan_affinity=plan_affinity,
                plan_window_seconds=plan_window_ms / 1000,
            ),
            nodeslo=NodeSLOOptions(spec_owner=nodeslo_spec_owner),
            nodebandwidth=NodeBandwidthOptions(
                accounting_mode=accounting_mode, default_node_bandwidth=default_node_bandwidth
            ),
        ),
    )
    if kubeconfig:
        os.environ["KUBECONFIG"] = kubeconfig  # kopf's own login reads it too
    try:
        run_until_signal(lambda stop: run(options, stop), log_format)
    except (ComponentFailed, NoCredentials) as error:
        raise CommandError(str(error)) from None
    except (OSError, aiohttp.ClientError) as error:
        raise CommandError(f"cannot reach the API server ({server or 'kubeconfig'}): {error}") from None
    except ApiException as error:
        raise CommandError(f"the API server refused: {error.status} {error.reason}") from None


def _backoffs(text: str) -> tuple[float, ...]:
    try:
        delays = tuple(float(part) for part in text.split(","))
    except ValueError:
        delays = ()
    if not delays or not all(0 <= delay <= 3600 for delay in delays):
        raise click.BadParameter(f"expected comma-separated seconds between 0 and 3600 (got {text!r})")
    return delays
