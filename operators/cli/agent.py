"""`netaware agent`: the node agent (one per node, a DaemonSet in the chart, off by default)."""

from __future__ import annotations

import json
from typing import Any

import click

from operators.api.quantity import Quantity
from operators.cli.common import CommandError, bandwidth_value, load, log_format_option


@click.command("agent")
@click.option("--node-name", envvar="NODE_NAME", default=None, help="This node (from the downward API: spec.nodeName).")
@click.option("--interface", default=None, help="The NIC to shape (default: the device of the IPv4 default route).")
@click.option(
    "--ifb", default="netaware-ifb", show_default=True, help="The ifb device the interface's ingress goes through."
)
@click.option(
    "--backend",
    type=click.Choice(["tc", "terway-qos"]),
    default="tc",
    show_default=True,
    help="tc: HTB classes, nftables and u32 in the kernel (measured); terway-qos: write the files the terway-qos "
    "eBPF dataplane reads (bytes/s) and measure nothing.",
)
@click.option(
    "--terway-qos-dir",
    default="/var/lib/terway/qos",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the terway-qos backend writes global_bps_config and pod.json.",
)
@click.option(
    "--terway-qos-cgroup-driver",
    type=click.Choice(["systemd", "cgroupfs"]),
    default="systemd",
    show_default=True,
    help="The kubelet's cgroupDriver: how the pods' cgroup directories in pod.json are named (terway-qos finds a "
    "pod by its net_cls cgroup).",
)
@click.option(
    "--terway-qos-cgroup-root",
    default="/sys/fs/cgroup/net_cls",
    show_default=True,
    help="Where the host mounts the net_cls cgroup hierarchy (the root of the cgroupDir paths in pod.json).",
)
@click.option(
    "-f",
    "--filename",
    "filenames",
    multiple=True,
    help="Enforce from this snapshot (files, folders, - for stdin) instead of a cluster; with --once.",
)
@click.option("--once", is_flag=True, help="One pass, then exit (prints what it did as JSON).")
@click.option(
    "--dry-run", is_flag=True, help="Print the plan (classes, rates, members per direction) and change nothing."
)
@click.option("--cleanup", is_flag=True, help="Remove every qdisc, class, filter, device and table the agent made.")
@click.option(
    "--default-node-bandwidth",
    callback=bandwidth_value,
    default=None,
    metavar="QUANTITY",
    help="The node's total when neither its annotations nor its NodeSLO give one (bits/s, e.g. 10G).",
)
@click.option(
    "--publish-capacity",
    is_flag=True,
    help="Give a node without node.koordinator.sh/network-bandwidth the interface's speed (/sys/class/net/IF/speed).",
)
@click.option(
    "--resync", type=click.FloatRange(min=1), default=60.0, show_default=True, help="Seconds between full passes."
)
@click.option(
    "--report-interval",
    type=click.FloatRange(min=1),
    default=10.0,
    show_default=True,
    help="Seconds between measurements; the node's usage is written at most once per interval, on change.",
)
@click.option("--health-port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="0: none.")
@click.option("--listen-address", default="0.0.0.0", show_default=True, help="Address of the health/metrics port.")
@click.option(
    "--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Default: in-cluster, else $KUBECONFIG."
)
@click.option("--server", default=None, metavar="URL", help="A plain-HTTP API server (the embedded emulator).")
@click.option(
    "--cleanup-on-uninstall",
    "daemonset",
    default="",
    metavar="NAMESPACE/NAME",
    help="The agent's DaemonSet: on SIGTERM, remove the shaping when it is gone (uninstall), keep it otherwise.",
)
@log_format_option()
@click.option("--netns", default=None, hidden=True)  # tests: the node's interfaces live in this network namespace
def agent_command(
    node_name: str | None,
    interface: str | None,
    ifb: str,
    backend: str,
    terway_qos_dir: str,
    terway_qos_cgroup_driver: str,
    terway_qos_cgroup_root: str,
    filenames: tuple[str, ...],
    once: bool,
    dry_run: bool,
    cleanup: bool,
    default_node_bandwidth: Quantity | None,
    publish_capacity: bool,
    resync: float,
    report_interval: float,
    health_port: int,
    listen_address: str,
    kubeconfig: str | None,
    server: str | None,
    daemonset: str,
    log_format: str,
    netns: str | None,
) -> None:
    """Enforce this node's NodeSLO network QoS in the kernel and measure it: HTB classes system/LSR/LS/BE (rate =
    request, ceil = limit, bits/s by the NodeSLO status rule) on the interface for egress and on an ifb for
    ingress, one leaf per pod (its kubernetes.io/*-bandwidth as ceiling), pods classified by IP; per-class and
    per-pod rates as metrics and in the NodeSLO's status.networkUsage (--backend terway-qos: the same plan as
    terway-qos's files, unmeasured). Stops gracefully on SIGTERM and leaves the shaping in place (--cleanup
    removes it)."""
    from operators.agent.enforce import Backend, TcBackend
    from operators.agent.kernel import Kernel, KernelError
    from operators.agent.terway import TerwayBackend
    from operators.engine.enforcement.terway import CgroupLayout

    try:
        kernel = Kernel(interface or "", ifb, netns)
    except OSError as error:
        raise CommandError(f"netlink: {error}") from None
    try:
        if not interface:
            found = kernel.default_interface()
            if found is None:
                raise CommandError("--interface: no IPv4 default route to take the device from; name one")
            kernel.interface = found
        if kernel.index(kernel.interface) is None:
            raise CommandError(f"--interface: device {kernel.interface!r} does not exist")
        layout = CgroupLayout(terway_qos_cgroup_driver, terway_qos_cgroup_root)
        enforcer: Backend = TcBackend(kernel) if backend == "tc" else TerwayBackend(terway_qos_dir, layout)
        if cleanup:
            removed = enforcer.cleanup()
            click.echo(json.dumps({"interface": kernel.interface, "removed": removed}, indent=2))
            return
        if not node_name:
            raise CommandError("--node-name (or NODE_NAME) is required")
        if filenames:
            if not (once or dry_run):
                raise CommandError("-f: enforcing from a snapshot is one pass: add --once (or --dry-run)")
            _once_from_snapshot(kernel, enforcer, node_name, filenames, default_node_bandwidth, dry_run)
            return
        if daemonset and "/" not in daemonset:
            raise CommandError(f"--cleanup-on-uninstall: {daemonset!r} is not NAMESPACE/NAME")
        from operators.agent.live import AgentOptions

        options = AgentOptions(
            node=node_name,
            default_total=default_node_bandwidth,
            publish_capacity=publish_capacity,
            resync=resync,
            report_interval=report_interval,
            once=once,
            dry_run=dry_run,
            daemonset=daemonset,
        )
        _live(kernel, enforcer, options, health_port, listen_address, kubeconfig, server, log_format)
    except KernelError as error:
        raise CommandError(str(error)) from None
    finally:
        kernel.close()


def _once_from_snapshot(
    kernel: Any, backend: Any, node_name: str, filenames: tuple[str, ...], default: Quantity | None, dry_run: bool
) -> None:
    from operators.agent.live import snapshot_planner

    snapshot = load(filenames)
    planner = snapshot_planner(snapshot, node_name, default)
    if planner is None:
        raise CommandError(f"--node-name: node {node_name!r} is not in the snapshot")
    result = backend.enforce(planner, dry_run)
    from operators.agent.terway import TerwayBackend
    from operators.engine.enforcement.terway import terway_files

    document = (
        {
            **result.plan.to_json(),
            "problems": result.problems,
            **({"files": terway_files(result.plan, backend.layout)[0]} if isinstance(backend, TerwayBackend) else {}),
        }
        if dry_run
        else {
            "node": node_name,
            "interface": kernel.interface,
            "operations": result.operations,
            "applied": result.applied,
            "problems": result.problems,
        }
    )
    click.echo(json.dumps(document, indent=2))


def _live(
    kernel: Any,
    backend: Any,
    options: Any,
    health_port: int,
    listen_address: str,
    kubeconfig: str | None,
    server: str | None,
    log_format: str,
) -> None:
    from operators import compose
    from operators.cli.signals import run_until_signal
    from operators.kube import NoCredentials

    source = compose.ClusterSource(None, server, kubeconfig)
    try:
        run_until_signal(
            lambda stop: compose.agent(source, kernel, backend, options, health_port, listen_address, stop),
            log_format,
        )
    except NoCredentials as error:
        raise CommandError(str(error)) from None
    except OSError as error:
        raise CommandError(f"cannot serve the health port: {error.strerror or error}") from None
