"""The serving commands: the webhook, the extender and the demo. They parse flags and hand over to the composition
root (:mod:`operators.compose`); ``netaware run`` is :mod:`operators.cli.run`."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from operators.cli.common import (
    CommandError,
    filename_option,
    load,
    load_scheduler_config,
    log_format_option,
    scheduler_config_option,
)
from operators.cli.signals import run_until_signal

if TYPE_CHECKING:
    from aiohttp import web

    from webhooks.placement import Placement


@dataclass(frozen=True)
class ServingFlags:
    """The flags every HTTP component takes (``serving_options``)."""

    listen_address: str | None
    port: int
    tls_cert_file: str | None
    tls_private_key_file: str | None
    cert_reload_interval: float
    insecure: bool
    shutdown_delay: float
    health_port: int
    kubeconfig: str | None
    server: str | None
    log_format: str

    @property
    def address(self) -> str:
        """Plain HTTP stays on loopback unless an address is given."""
        return self.listen_address or ("127.0.0.1" if self.insecure else "0.0.0.0")


def serving_options(default_port: int) -> Callable[[Any], Any]:
    """The listen address, port, TLS and API server flags, handed to the command as one ``flags`` argument."""
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
        click.option(
            "--insecure",
            is_flag=True,
            help="Serve plain HTTP: for local testing, or on 127.0.0.1 for a caller in the same pod (the chart's "
            "second scheduler calls its own extender so).",
        ),
        click.option(
            "--shutdown-delay",
            default=0.0,
            show_default=True,
            type=click.FloatRange(min=0, max=300),
            help="On SIGTERM, keep serving this many seconds, answering /readyz 503 and closing each answer's "
            "connection (callers move to other replicas meanwhile), and after it while requests still come (until "
            "none for 1 s, 15 s more at most); then stop listening and finish what is in flight.",
        ),
        click.option(
            "--health-port",
            default=0,
            show_default=True,
            type=click.IntRange(0, 65535),
            help="Also serve /healthz, /readyz and /metrics alone on this port of 0.0.0.0, over plain HTTP (0: none): "
            "where the kubelet probes a server that listens on 127.0.0.1.",
        ),
        click.option(
            "--kubeconfig",
            type=click.Path(dir_okay=False),
            default=None,
            help="Kubeconfig to watch the cluster with (default: in-cluster, else $KUBECONFIG or ~/.kube/config).",
        ),
        click.option("--server", default=None, metavar="URL", help="A plain-HTTP API server (the embedded emulator)."),
        log_format_option(),
    ]
    names = [field.name for field in dataclasses.fields(ServingFlags)]

    def apply(command: Any) -> Any:
        @functools.wraps(command)
        def with_flags(**given: Any) -> Any:
            flags = ServingFlags(**{name: given.pop(name) for name in names})
            return command(flags=flags, **given)

        wrapped: Any = with_flags
        for option in reversed(options):
            wrapped = option(wrapped)
        return wrapped

    return apply


def serve_component(
    flags: ServingFlags,
    filenames: tuple[str, ...],
    component: Callable[[Any], contextlib.AbstractAsyncContextManager[web.Application]],
    serve: Callable[..., Awaitable[None]],
) -> None:
    """Build ``component`` from its cluster source (the snapshot of ``-f``, else watches) through the composition
    root and ``serve`` it until a signal; TLS and credential problems are one-line errors."""
    import asyncio
    import ssl

    from operators import compose
    from operators.kube import NoCredentials
    from operators.serving import ReloadingTLS

    if not flags.insecure and not (flags.tls_cert_file and flags.tls_private_key_file):
        raise click.UsageError("--tls-cert-file and --tls-private-key-file are required (or --insecure for testing)")
    try:
        tls = None if flags.insecure else ReloadingTLS(str(flags.tls_cert_file), str(flags.tls_private_key_file))
    except (OSError, ssl.SSLError) as error:
        raise CommandError(f"cannot load the TLS certificate and key: {error}") from None
    source = compose.ClusterSource(load(filenames) if filenames else None, flags.server, flags.kubeconfig)

    async def body(stop: asyncio.Event) -> None:
        async with component(source) as app:
            await serve(app, flags.address, flags.port, tls, stop, flags.cert_reload_interval, flags.shutdown_delay,
                        flags.health_port)  # fmt: skip

    try:
        run_until_signal(body, flags.log_format)
    except NoCredentials as error:
        raise CommandError(f"{error}, or -f PATH (serve a snapshot)") from None
    except OSError as error:  # the port is taken, the address is not ours, ...
        raise CommandError(f"cannot serve: {error.strerror or error}") from None


@click.command("webhook")
@serving_options(default_port=9443)
@click.option(
    "--ordered-scheduling-default",
    is_flag=True,
    help="Gate the pods of every Ready AppGroup for topology-ordered scheduling, unless the AppGroup is annotated "
    'netaware.io/ordered-scheduling: "false" (default: only AppGroups annotated "true").',
)
@click.option(
    "--bandwidth-resources",
    type=click.Choice(("off", "duplex", "combined")),
    default="off",
    show_default=True,
    help="The bandwidth guarantee: pods also request their bandwidth as extended resources that kube-scheduler "
    "accounts (duplex: netaware.io/ingress-bandwidth and netaware.io/egress-bandwidth; combined: "
    "netaware.io/bandwidth = ingress + egress), requests = limits on the first container, in bits/s. Nodes "
    "advertise them with `netaware run --components nodebandwidth --accounting-mode` (the same mode).",
)
@click.option(
    "--scheduler-name",
    default="",
    help="Send the pods of AppGroups to this scheduler: a pod naming no scheduler or default-scheduler gets it in "
    "spec.schedulerName; one naming another is left alone, with a warning and a Warning Event on its AppGroup. "
    'An AppGroup\'s annotation netaware.io/scheduler-name overrides it ("": none). Default: none (the chart sets '
    "its second scheduler's name).",
)
@click.option(
    "--plan-pods-keep-scheduler",
    is_flag=True,
    help="The pods of AppGroups released by plan (netaware.io/ordered-scheduling: plan) keep the scheduler they "
    "name instead of getting --scheduler-name: each is released with a required node affinity for its planned "
    "node, which the cluster's kube-scheduler checks on that node alone, with no call to the extender. An "
    "AppGroup's annotation netaware.io/scheduler-name still applies. The chart sets it unless "
    "bandwidth.guarantee is extender or operator.planAffinity is preferred.",
)
@click.option(
    "--placement-url",
    default="",
    help="The extender's placement (https://HOST:PORT/place-pods of `netaware extender --place-at-admission`): the "
    "pods of plan-ungated AppGroups are placed by it as this webhook admits them, in one answer, instead of "
    "registering the placement as a webhook of its own (two API server calls more per pod). A placement that "
    "fails or is late admits the pod unplaced. Default: none.",
)
@click.option(
    "--placement-ca-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="The CA bundle (PEM) that verifies the extender's certificate for --placement-url. Default: the system's.",
)
@click.option(
    "--placement-timeout",
    type=click.FloatRange(min=0.05, max=10.0),
    default=1.0,
    show_default=True,
    help="Seconds an admission waits for the extender's placement; keep it under the webhook configuration's "
    "timeoutSeconds (2 in the chart).",
)
@filename_option(required=False)
def webhook_command(
    flags: ServingFlags,
    ordered_scheduling_default: bool,
    bandwidth_resources: str,
    scheduler_name: str,
    plan_pods_keep_scheduler: bool,
    placement_url: str,
    placement_ca_file: str | None,
    placement_timeout: float,
    filenames: tuple[str, ...],
) -> None:
    """Serve the bandwidth mutating admission webhook (POST /mutate-pods).

    It adds pod bandwidth annotations and, to pods of AppGroups that ask for ordered scheduling,
    the scheduling gate netaware.io/topology-order (removed by the AppGroup controller); with
    --scheduler-name, AppGroups' pods are sent to that scheduler.
    AppGroups and Namespaces come from a watch of the cluster (in-cluster credentials or the
    kubeconfig), or from a snapshot with -f.
    """
    from operators import compose
    from operators.engine.cluster.bandwidth import Accounting
    from webhooks.server import serve

    resources = None if bandwidth_resources == "off" else Accounting(bandwidth_resources)
    placement = placement_client(placement_url.strip(), placement_ca_file, placement_timeout)
    serve_component(
        flags,
        filenames,
        lambda source: compose.webhook(
            source, ordered_scheduling_default, resources, scheduler_name.strip(), plan_pods_keep_scheduler, placement
        ),
        serve,
    )


def placement_client(url: str, ca_file: str | None, timeout: float) -> Placement | None:
    """The webhook's ``--placement-*`` flags: the extender's placement, or None; one-line errors naming the flag."""
    import ssl
    import urllib.parse

    from webhooks.placement import Placement

    if not url:
        if ca_file:
            raise click.UsageError("--placement-ca-file needs --placement-url")
        return None
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("https", "http") or not parsed.hostname:
        raise click.BadParameter(f"{url!r} is not an http(s)://HOST[:PORT]/PATH URL", param_hint="--placement-url")
    if ca_file and parsed.scheme != "https":
        raise click.UsageError("--placement-ca-file needs an https:// --placement-url")
    try:
        context = ssl.create_default_context(cafile=ca_file) if ca_file else None
    except (OSError, ssl.SSLError) as error:
        raise CommandError(f"--placement-ca-file {ca_file}: cannot load the CA bundle: {error}") from None
    return Placement(url, timeout, context)


@click.command("extender")
@serving_options(default_port=8888)
@scheduler_config_option
@filename_option(required=False)
@click.option(
    "--nominate-from-nodes",
    default=1000,
    show_default=True,
    type=click.IntRange(min=0),
    help="On clusters of at least this many nodes, write the planned node of each pod a plan-ungated plan placed "
    "and kube-scheduler has not asked about yet into its status.nominatedNodeName: kube-scheduler then tries that "
    "node alone before scanning every node (0: never). Needs patch on pods/status.",
)
@click.option(
    "--place-at-admission/--no-place-at-admission",
    default=False,
    show_default=True,
    help="Serve POST /place-pods, a mutating webhook that plans each pod of a plan-ungated AppGroup as it is "
    "created and pins it to its planned node (a required node affinity on metadata.name): kube-scheduler then "
    "filters that node alone.",
)
def extender_command(
    flags: ServingFlags,
    config_path: str | None,
    filenames: tuple[str, ...],
    nominate_from_nodes: int,
    place_at_admission: bool,
) -> None:
    """Serve the kube-scheduler extender (POST /filter, POST /prioritize).

    Nodes, pods, AppGroups, NetworkTopologies and NodeSLOs come from watches of the cluster, or from
    a snapshot with -f.
    """
    from operators import compose
    from operators.extender.server import serve

    config = load_scheduler_config(config_path)
    serve_component(
        flags,
        filenames,
        lambda source: compose.extender(source, config, nominate_from_nodes, place_at_admission),
        serve,
    )


@click.command("demo")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(min=1), help="Seconds per step.")
def demo_command(timeout: float) -> None:
    """Run the whole suite against the embedded API emulator with the example cluster, and show the result.

    Exits 0 when every component converged, 1 with the reason when one did not.
    """
    import asyncio
    import importlib.util
    import logging

    if importlib.util.find_spec("kmock") is None:
        raise CommandError(
            "netaware demo runs on the embedded API emulator, which needs the emulator extra: "
            "pip install 'netaware[emulator]'"
        )
    from operators.demo import run_demo

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kopf").setLevel(logging.ERROR)  # kopf's shutdown notes are not the demo's business
    sys.exit(asyncio.run(run_demo(click.echo, timeout)))
