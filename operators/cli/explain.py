"""`netaware explain`: why a pod went where it went (or nowhere), from a live cluster or a snapshot. Installed as
`kubectl-netaware` too, so `kubectl netaware explain pod NS/NAME` uses kubectl's current context."""

from __future__ import annotations

from typing import Any

import click

from operators.cli import output
from operators.cli.common import CommandError, load, load_scheduler_config, scheduler_config_option

LIVE_TIMEOUT = 30.0


def _source_options(command: Any) -> Any:
    command = click.option("--server", default=None, metavar="URL", help="A plain-HTTP API server (the emulator).")(
        command
    )
    command = click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False),
        default=None,
        help="Default: in-cluster, else $KUBECONFIG or ~/.kube/config (kubectl's current context).",
    )(command)
    return click.option(
        "-f",
        "--filename",
        "filenames",
        multiple=True,
        type=click.Path(exists=True),
        help="Explain from a snapshot (YAML files or folders) instead of the cluster.",
    )(command)


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
    import asyncio

    from operators import compose
    from operators.engine.cluster.objects import Pod
    from operators.engine.scheduling.explain import why_not
    from operators.engine.scheduling.index import ClusterIndex
    from operators.engine.scheduling.schedule import schedule
    from operators.extender.live import KINDS
    from operators.kube import NoCredentials

    pod_namespace, _, name = reference.rpartition("/")
    pod_namespace = pod_namespace or namespace
    config = load_scheduler_config(config_path)
    source = compose.ClusterSource(load(filenames) if filenames else None, server, kubeconfig)

    async def listed() -> Any:
        async with asyncio.timeout(LIVE_TIMEOUT):
            return await compose.snapshot_of(source, KINDS)

    try:
        snapshot = asyncio.run(listed())
    except NoCredentials as error:
        raise CommandError(str(error)) from None
    except TimeoutError:
        raise CommandError(
            f"the cluster did not list nodes, pods and netaware's kinds within {LIVE_TIMEOUT:g} s"
        ) from None
    found = next((p for p in snapshot.pods if p.namespace == pod_namespace and p.name == name), None)
    if found is None:
        raise CommandError(f"pod {pod_namespace}/{name} not found")
    result = schedule(Pod.parse(dict(found.raw)), ClusterIndex.build(snapshot), config)
    reasons = why_not(result)
    if fmt != "table":
        click.echo(output.dump({**result.to_simulator_json(), "whyNot": reasons}, fmt), nl=False)
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
    for line in reasons:
        click.echo(f"why not: {line}")
