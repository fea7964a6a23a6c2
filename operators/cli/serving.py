"""The serving commands: the live components (``run``, ``webhook``, ``extender``) and the ``demo``. They parse
flags and hand over to the composition root (:mod:`operators.compose`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import click

from operators.cli.common import (
    CommandError,
    descheduler_policy_option,
    filename_option,
    load,
    load_descheduler_policy,
    load_scheduler_config,
    scheduler_config_option,
)


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


@click.command("webhook")
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

    from operators import compose
    from webhooks.server import serve

    address = listen_on(listen_address, insecure)
    source = compose.ClusterSource(load(filenames) if filenames else None, server, kubeconfig)

    async def body(stop: asyncio.Event, tls: Any) -> None:
        async with compose.webhook(source) as app:
            await serve(app, address, port, tls, stop, cert_reload_interval)

    run_server(insecure, tls_cert_file, tls_private_key_file, body)


@click.command("extender")
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

    from operators import compose
    from operators.extender.server import serve

    config = load_scheduler_config(config_path)
    address = listen_on(listen_address, insecure)
    source = compose.ClusterSource(load(filenames) if filenames else None, server, kubeconfig)

    async def body(stop: asyncio.Event, tls: Any) -> None:
        async with compose.extender(source, config) as app:
            await serve(app, address, port, tls, stop, cert_reload_interval)

    run_server(insecure, tls_cert_file, tls_private_key_file, body)


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


@click.command("demo")
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
