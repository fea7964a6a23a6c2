"""The serving commands: the live components (``run``, ``webhook``, ``extender``) and the ``demo``. They parse
flags and hand over to the composition root (:mod:`operators.compose`)."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

import click

from operators.cli.common import (
    CommandError,
    filename_option,
    load,
    load_scheduler_config,
    scheduler_config_option,
)
from operators.cli.signals import run_until_signal


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
