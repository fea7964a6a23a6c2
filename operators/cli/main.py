"""``netaware``: the offline engine commands and the live components (SPEC.md §5).

Exit codes: 0 success, 1 an input or runtime error (one line on stderr naming the file and
field), 2 a usage error, 3 a command that is declared but not implemented yet.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import click
import yaml

from operators import __version__
from operators.api.errors import FieldError
from operators.api.meta import parse_time
from operators.cli import output
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.status.reconcile import reconcile
from operators.sources.files import LoadError, load_snapshot

EXIT_ERROR = 1


class CommandError(click.ClickException):
    """A one-line error on stderr, exit code 1."""

    exit_code = EXIT_ERROR

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {one_line(self.format_message())}", err=True)


def one_line(text: str) -> str:
    """``text`` on one line whatever it quotes: characters that break lines (a label key from a snapshot may
    hold any) are written as escapes."""
    return "".join(
        char if char.isprintable() or char == " " else char.encode("unicode_escape").decode() for char in text
    )


def filename_option(required: bool = True) -> Callable[[Any], Any]:
    return click.option(
        "-f",
        "--filename",
        "filenames",
        multiple=True,
        required=required,
        metavar="PATH",
        help="Snapshot YAML/JSON (kubectl get -o yaml): a file, a folder (recursive) or - for stdin. Repeatable.",
    )


output_option = click.option(
    "-o",
    "--output",
    "fmt",
    type=click.Choice(output.FORMATS),
    default=None,
    help="Output format (default: table on a terminal, yaml otherwise).",
)


def _parse_now(_ctx: click.Context, _param: click.Parameter, value: str | None) -> datetime.datetime:
    if value is None:
        return datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    try:
        return parse_time(value)
    except ValueError as error:
        raise click.BadParameter(f"not an RFC 3339 time: {value!r}") from error


now_option = click.option(
    "--now",
    callback=_parse_now,
    metavar="RFC3339",
    help="The clock the engine uses (default: the current time); fixes output for reproducible runs.",
)


def load(filenames: tuple[str, ...]) -> Snapshot:
    try:
        snapshot = load_snapshot(filenames)
    except LoadError as error:
        raise CommandError(str(error)) from None
    for warning in snapshot.warnings:
        click.echo(f"warning: {warning}", err=True)
    return snapshot


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="netaware")
@click.option("--debug", is_flag=True, help="Show the Python traceback of an unexpected error (first option only).")
def cli(debug: bool) -> None:
    """netaware: network-aware scheduling for Kubernetes.

    Offline commands (reconcile, schedule, deschedule, simulate) compute from YAML
    snapshots of a cluster; run, webhook and extender are the live components.
    """


@cli.command("reconcile")
@filename_option()
@output_option
@now_option
def reconcile_command(filenames: tuple[str, ...], fmt: str | None, now: datetime.datetime) -> None:
    """Print every object the controllers would write (a v1 List)."""
    snapshot = load(filenames)
    items = reconcile(snapshot, now)
    resolved = output.resolve_format(fmt)
    if resolved == "table":
        rows = [(item["kind"], item["metadata"].get("namespace", ""), item["metadata"]["name"]) for item in items]
        click.echo(output.table(("kind", "namespace", "name"), rows), nl=False)
    else:
        click.echo(output.dump(output.as_list(items), resolved), nl=False)


scheduler_config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="KubeSchedulerConfiguration-shaped file: plugin weights and pluginConfig args.",
)


def load_config_file(path: str, parse: Callable[[Any], Any]) -> Any:
    """Read a YAML (or JSON) file and ``parse`` it; any failure is one line naming the file and the field."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
        return parse(document)
    except OSError as error:
        raise CommandError(f"{path}: cannot read: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise CommandError(f"{path}: not valid YAML: {str(error).splitlines()[0]}") from None
    except RecursionError:
        raise CommandError(f"{path}: nested too deeply") from None
    except (FieldError, KeyError, TypeError, ValueError, AttributeError) as error:
        raise CommandError(f"{path}: {error}") from None


def load_scheduler_config(path: str | None) -> Any:
    from operators.api.config.scheduler import SchedulerConfig, parse_config

    return SchedulerConfig() if path is None else load_config_file(path, parse_config)


def load_descheduler_policy(path: str | None) -> Any:
    from operators.api.config.descheduler import DEFAULT_POLICY, parse_policy

    return parse_policy(DEFAULT_POLICY) if path is None else load_config_file(path, parse_policy)


@cli.command("schedule")
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
    """Filter and score every node of a snapshot for one pod (kube-scheduler-simulator's JSON)."""
    from operators.engine.cluster.snapshot import Pod
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


def serving_options(default_port: int) -> Callable[[Any], Any]:
    """The listen address, port and TLS flags every HTTP component takes."""
    options = [
        click.option(
            "--listen-address",
            default=None,
            help="Address to listen on (default: 0.0.0.0 with TLS, 127.0.0.1 with --insecure).",
        ),
        click.option(
            "--port", default=default_port, show_default=True, type=click.IntRange(1, 65535), help="Port to listen on."
        ),
        click.option(
            "--tls-cert-file", type=click.Path(exists=True, dir_okay=False), help="Serving certificate (PEM)."
        ),
        click.option(
            "--tls-private-key-file", type=click.Path(exists=True, dir_okay=False), help="Its private key (PEM)."
        ),
        click.option(
            "--cert-reload-interval",
            default=10.0,
            show_default=True,
            type=click.FloatRange(min=0.1),
            help="Seconds between checks of the certificate files for changes.",
        ),
        click.option("--insecure", is_flag=True, help="Serve plain HTTP. For local testing only."),
        click.option(
            "--kubeconfig",
            type=click.Path(dir_okay=False),
            default=None,
            help="Kubeconfig to watch the cluster with (default: in-cluster, else $KUBECONFIG or ~/.kube/config).",
        ),
        click.option("--server", default=None, metavar="URL", help="A plain-HTTP API server (the embedded emulator)."),
    ]

    def apply(command: Any) -> Any:
        for option in reversed(options):
            command = option(command)
        return command

    return apply


def run_until_signal(body: Callable[[Any], Awaitable[None]], log_format: str = "text") -> None:
    """Run ``body(stop)`` until SIGTERM or SIGINT sets ``stop`` (graceful: ``body`` finishes its work)."""
    import asyncio
    import signal

    from operators import logs

    logs.configure(log_format)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await body(stop)

    asyncio.run(main())


def run_server(
    insecure: bool,
    tls_cert_file: str | None,
    tls_private_key_file: str | None,
    body: Callable[[Any, Any], Awaitable[None]],
) -> None:
    """Check the TLS flags, then run ``body(stop, tls)`` until a signal."""
    import ssl

    from operators.kube import NoCredentials
    from operators.serving import ReloadingTLS

    if not insecure and not (tls_cert_file and tls_private_key_file):
        raise click.UsageError("--tls-cert-file and --tls-private-key-file are required (or --insecure for testing)")
    try:
        tls = None if insecure else ReloadingTLS(str(tls_cert_file), str(tls_private_key_file))
    except (OSError, ssl.SSLError) as error:
        raise CommandError(f"cannot load the TLS certificate and key: {error}") from None
    try:
        run_until_signal(lambda stop: body(stop, tls))
    except NoCredentials as error:
        raise CommandError(str(error)) from None
    except OSError as error:  # the port is taken, the address is not ours, ...
        raise CommandError(f"cannot serve: {error.strerror or error}") from None


def listen_on(address: str | None, insecure: bool) -> str:
    """Plain HTTP stays on loopback unless an address is given."""
    return address or ("127.0.0.1" if insecure else "0.0.0.0")


@cli.command("webhook")
@serving_options(default_port=9443)
@filename_option(required=False)
def webhook_command(
    listen_address: str | None,
    port: int,
    tls_cert_file: str | None,
    tls_private_key_file: str | None,
    cert_reload_interval: float,
    insecure: bool,
    kubeconfig: str | None,
    server: str | None,
    filenames: tuple[str, ...],
) -> None:
    """Serve the bandwidth mutating admission webhook (POST /mutate-pods).

    AppGroups and Namespaces come from a watch of the cluster (in-cluster credentials or the
    kubeconfig), or from a snapshot with -f.
    """
    import asyncio

    from operators.kube import api_client_factory
    from webhooks.server import serve
    from webhooks.view import ClusterView

    address = listen_on(listen_address, insecure)

    async def body(stop: asyncio.Event, tls: Any) -> None:
        if filenames:
            await serve(ClusterView.from_snapshot(load(filenames)), address, port, tls, stop, cert_reload_interval)
            return
        view = ClusterView()
        api = await api_client_factory(server, kubeconfig)()
        follower = asyncio.create_task(view.follow(api, stop))
        try:
            await serve(view, address, port, tls, stop, cert_reload_interval, api=api)
        finally:
            stop.set()
            await follower
            await api.close()

    run_server(insecure, tls_cert_file, tls_private_key_file, body)


@cli.command("extender")
@serving_options(default_port=8888)
@scheduler_config_option
@filename_option(required=False)
def extender_command(
    listen_address: str | None,
    port: int,
    tls_cert_file: str | None,
    tls_private_key_file: str | None,
    cert_reload_interval: float,
    insecure: bool,
    kubeconfig: str | None,
    server: str | None,
    config_path: str | None,
    filenames: tuple[str, ...],
) -> None:
    """Serve the kube-scheduler extender (POST /filter, POST /prioritize).

    Nodes, pods, AppGroups, NetworkTopologies and NodeSLOs come from watches of the cluster, or from
    a snapshot with -f.
    """
    import asyncio

    from operators.extender.server import ExtenderState, serve
    from operators.kube import api_client_factory
    from operators.sources.live import APPGROUPS, NETWORKTOPOLOGIES, NODES, NODESLOS, PODS, LiveSnapshot

    config = load_scheduler_config(config_path)

    address = listen_on(listen_address, insecure)

    async def body(stop: asyncio.Event, tls: Any) -> None:
        if filenames:
            snapshot = load(filenames)
            await serve(ExtenderState(lambda: snapshot, config), address, port, tls, stop, cert_reload_interval)
            return
        live = LiveSnapshot((NODES, PODS, APPGROUPS, NETWORKTOPOLOGIES, NODESLOS))
        api = await api_client_factory(server, kubeconfig)()
        follower = asyncio.create_task(live.follow(api, stop))
        try:
            await serve(
                ExtenderState(live.snapshot, config, lambda: live.ready), address, port, tls, stop, cert_reload_interval
            )
        finally:
            stop.set()
            await follower
            await api.close()

    run_server(insecure, tls_cert_file, tls_private_key_file, body)


def descheduler_policy_option(flag: str) -> Callable[[Any], Any]:
    return click.option(
        flag,
        "policy_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="DeschedulerConfiguration with a LowNodeLoad profile (default: netBandwidth low 30 %, high 70 %).",
    )


@cli.command("deschedule")
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
@now_option
def deschedule_command(
    filenames: tuple[str, ...], policy_path: str | None, metrics_path: str | None, fmt: str, now: datetime.datetime
) -> None:
    """Plan LowNodeLoad evictions for a snapshot (no API calls): node classes, usage, ordered evictions."""
    from operators.engine.descheduling.lownodeload import plan
    from operators.engine.descheduling.usage import prometheus_samples

    snapshot = load(filenames)
    policy = load_descheduler_policy(policy_path)
    samples = None
    if metrics_path is not None:
        label = policy.args.usage.prometheus.node_label
        samples = load_config_file(metrics_path, lambda document: prometheus_samples(document, label))
    click.echo(output.dump(plan(snapshot, policy, now, prometheus=samples).to_json(), fmt), nl=False)


def _components(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, ...]:
    from operators.runtime import ALL_COMPONENTS

    names = tuple(name.strip() for name in value.split(",") if name.strip())
    unknown = [name for name in names if name not in ALL_COMPONENTS]
    if unknown or not names:
        raise click.BadParameter(f"{value!r}: expected a comma-separated list of {', '.join(ALL_COMPONENTS)}")
    return names


@cli.command("run")
@click.option(
    "--components",
    default="appgroup,networktopology,nodeslo",
    show_default=True,
    callback=_components,
    help="Comma-separated: appgroup, networktopology, nodeslo, descheduler.",
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
    "--log-format",
    type=click.Choice(("text", "json")),
    default="text",
    show_default=True,
    help="json: one object per line.",
)
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
    log_format: str,
    namespaces: tuple[str, ...],
    all_namespaces: bool,
    api_error_backoffs: str,
    nodeslo_spec_owner: str,
    kubeconfig: str | None,
) -> None:
    """Run the controllers (and the descheduler) against a cluster until SIGTERM.

    With leader election (the default) only the holder of the Lease runs them; a follower takes over
    within the lease duration when the leader dies, at once when it stops gracefully.
    """
    import aiohttp
    from kubernetes_asyncio.client.exceptions import ApiException

    from operators.api.config.controllers import ControllerOptions, NodeSLOOptions
    from operators.kube import NoCredentials
    from operators.runtime import DESCHEDULER, ComponentFailed, LeaderElectionOptions, RunOptions, run

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
        signals=True,
        namespaces=namespaces,
        api_error_backoffs=_backoffs(api_error_backoffs),
        kubeconfig=kubeconfig,
        controllers=ControllerOptions(nodeslo=NodeSLOOptions(spec_owner=nodeslo_spec_owner)),
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


@cli.command("simulate")
@click.option(
    "--scenario",
    default="thesis-1",
    show_default=True,
    type=click.Choice(("thesis-1", "thesis-2", "thesis-3", "thesis-4")),
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
    from operators.engine.simulation import simulate as sim
    from operators.engine.simulation.rebalance import rebalance as run_rebalance

    if plot_path and not os.path.isdir(os.path.dirname(os.path.abspath(plot_path))):
        raise CommandError(f"--plot {plot_path}: the folder {os.path.dirname(plot_path) or '.'} does not exist")
    chosen = sim.scenario(scenario, nodes, pods)
    shapes = sim.expand(chosen.pods)
    if filenames:
        try:
            base = sim.Cluster.from_snapshot(load(filenames), chosen.node.bandwidth)
        except FieldError as error:
            raise CommandError(str(error)) from None
        if not base.names:
            raise CommandError(f"{', '.join(filenames)}: no Node in the snapshot to schedule onto")
    else:
        base = sim.Cluster.generated(chosen.nodes, chosen.node)
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


@cli.command("demo")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(min=1), help="Seconds per step.")
def demo_command(timeout: float) -> None:
    """Run the whole suite against the embedded API emulator with the example cluster, and show the result.

    Exits 0 when every component converged, 1 with the reason when one did not.
    """
    import asyncio
    import logging

    from operators.demo import run_demo

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kopf").setLevel(logging.ERROR)  # kopf's shutdown notes are not the demo's business
    sys.exit(asyncio.run(run_demo(click.echo, timeout)))


def main() -> None:
    """The console script: any error is one line on stderr and exit 1; ``--debug`` (or NETAWARE_DEBUG=1) shows
    the traceback of an unexpected one."""
    debug = "--debug" in sys.argv[1:2] or os.environ.get("NETAWARE_DEBUG") == "1"
    try:
        cli(prog_name="netaware")
    except Exception as error:
        if debug:
            raise
        text = str(error).splitlines()[0][:300] if str(error) else ""
        click.echo(f"error: unexpected {type(error).__name__}: {text} (rerun with --debug for the traceback)", err=True)
        sys.exit(EXIT_ERROR)
