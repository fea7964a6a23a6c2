"""`netaware probe`: the network probe (one per node, a DaemonSet in the chart)."""

from __future__ import annotations

import click

from operators.cli.common import CommandError, log_format_option


@click.command("probe")
@click.option(
    "--node-name", envvar="NODE_NAME", required=True, help="This node (from the downward API: spec.nodeName)."
)
@click.option("--topology", required=True, help="The NetworkTopology the rows are for (the ConfigMaps' label value).")
@click.option(
    "--namespace", envvar="POD_NAMESPACE", required=True, help="The NetworkTopology's namespace: where the rows go."
)
@click.option(
    "--peer-namespace",
    envvar="POD_NAMESPACE",
    default=None,
    help="Where the probe DaemonSet's pods are (default: --namespace).",
)
@click.option(
    "--peer-selector",
    default="app.kubernetes.io/component=probe",
    show_default=True,
    help="Label selector of the probe DaemonSet's pods (the peers).",
)
@click.option("--listen-address", default="0.0.0.0", show_default=True, help="Address of the endpoint and health port.")
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True, help="The endpoint's port.")
@click.option("--health-port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="0: none.")
@click.option(
    "--peers-per-zone",
    type=click.IntRange(min=1),
    default=None,
    help="Measure every peer of this node's zone and this many rotating peers of every other zone (default: all).",
)
@click.option("--interval", type=click.FloatRange(min=0.1), default=5.0, show_default=True, help="Seconds per round.")
@click.option(
    "--transactions",
    type=click.IntRange(1, 1000),
    default=10,
    show_default=True,
    help="Round trips per peer per round.",
)
@click.option(
    "--concurrency", type=click.IntRange(1, 256), default=8, show_default=True, help="Peers measured at once."
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.01),
    default=1.0,
    show_default=True,
    help="Seconds per connect or round trip.",
)
@click.option(
    "--report-interval",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="At most one write of this node's row per interval (and only when it changed).",
)
@click.option(
    "--ttl",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    help="Seconds a peer not measured stays in the row.",
)
@click.option(
    "--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Default: in-cluster, else $KUBECONFIG."
)
@click.option("--server", default=None, metavar="URL", help="A plain-HTTP API server (the embedded emulator).")
@log_format_option()
@click.option("--respond-delay", type=click.FloatRange(0, 10), default=0.0, hidden=True)  # tests: a slow peer
def probe_command(
    node_name: str,
    topology: str,
    namespace: str,
    peer_namespace: str | None,
    peer_selector: str,
    listen_address: str,
    port: int,
    health_port: int,
    peers_per_zone: int | None,
    interval: float,
    transactions: int,
    concurrency: int,
    timeout: float,
    report_interval: float,
    ttl: float,
    kubeconfig: str | None,
    server: str | None,
    log_format: str,
    respond_delay: float,
) -> None:
    """Measure round trips to the other nodes' probes (TCP request/response, netperf TCP_RR style) and
    publish this node's row of P90 latencies as a ConfigMap the NetworkTopology controller reads.

    Runs on every node as the chart's probe DaemonSet (pod-to-pod latency; with probe.hostNetwork,
    node-to-node). Stops gracefully on SIGTERM.
    """
    import faulthandler
    import signal

    from operators import compose
    from operators.cli.signals import run_until_signal
    from operators.kube import NoCredentials
    from operators.probe import ProbeOptions

    options = ProbeOptions(
        node=node_name,
        namespace=namespace,
        topology=topology,
        peer_namespace=peer_namespace or namespace,
        peer_selector=peer_selector,
        port=port,
        listen_address=listen_address,
        peers_per_zone=peers_per_zone,
        interval=interval,
        transactions=transactions,
        concurrency=concurrency,
        timeout=timeout,
        report_interval=report_interval,
        ttl=ttl,
        delay=respond_delay,
    )
    source = compose.ClusterSource(None, server, kubeconfig)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1`: every thread's stack on stderr
    try:
        run_until_signal(lambda stop: compose.probe(source, options, health_port, stop), log_format)
    except NoCredentials as error:
        raise CommandError(str(error)) from None
    except OSError as error:
        raise CommandError(f"cannot serve the probe endpoint: {error.strerror or error}") from None
