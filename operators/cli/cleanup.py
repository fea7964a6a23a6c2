"""``netaware cleanup``: undo what netaware wrote outside its own objects once it is uninstalled (the chart's
post-delete Job runs it; :mod:`operators.engine.status.uninstall` decides what). With ``-f`` it only reports what a
live run would do."""

from __future__ import annotations

import asyncio
import time
import urllib.parse
from typing import Any

import click

from operators.cli import output
from operators.cli.common import CommandError, cluster_source_options, one_line
from operators.engine.status.uninstall import Undo, what_to_undo

PASSES = 3  # a pod that changed while it was released is looked at again, from a fresh listing
WAIT_POLL = 1.0


@click.command("cleanup")
@cluster_source_options("Report what a live run would undo in a snapshot (YAML files or folders); nothing is written.")
@click.option(
    "--scheduler-name",
    default="",
    help="The removed second scheduler: its pending pods cannot schedule any more (the chart's secondScheduler.name).",
)
@click.option(
    "--reschedule-pending",
    is_flag=True,
    help="Delete the pending pods that can no longer schedule when a controller owns them (it creates them again, "
    "without netaware); without it they are only reported.",
)
@click.option(
    "--wait-for",
    "wait_for",
    multiple=True,
    metavar="NAMESPACE/SELECTOR",
    help="First wait until no pod matches this label selector in NAMESPACE (netaware's own pods, which would "
    "write again). Repeatable.",
)
@click.option(
    "--wait-seconds", default=120.0, show_default=True, type=click.FloatRange(min=0), help="How long --wait-for waits."
)
@click.option("--dry-run", is_flag=True, help="List the cluster and report, write nothing.")
@click.option("-o", "--output", "fmt", type=click.Choice(("json", "yaml", "table")), default="table", show_default=True)
def cleanup_command(
    filenames: tuple[str, ...],
    kubeconfig: str | None,
    server: str | None,
    scheduler_name: str,
    reschedule_pending: bool,
    wait_for: tuple[str, ...],
    wait_seconds: float,
    dry_run: bool,
    fmt: str,
) -> None:
    """Undo what netaware wrote outside its own objects, after it was uninstalled.

    Releases every pod still held by netaware's scheduling gate, deletes (with --reschedule-pending) the pending pods
    that can no longer schedule when a controller creates them again, and removes netaware's bandwidth resources
    from the nodes where no running pod requests them. AppGroups, NetworkTopologies and NodeSLOs are the users'
    and are left alone.
    """
    from operators.cli.common import load

    waits = [_wait_target(text) for text in wait_for]
    if filenames:
        undo = what_to_undo(load(filenames), scheduler_name.strip(), reschedule_pending)
        _report(undo, fmt, written=False)
        return
    undo, failures = _run_live(
        kubeconfig, server, scheduler_name.strip(), reschedule_pending, waits, wait_seconds, dry_run
    )
    _report(undo, fmt, written=not dry_run)
    if failures:
        raise CommandError(f"{len(failures)} write(s) failed: {'; '.join(failures[:3])}")


def _wait_target(text: str) -> tuple[str, str]:
    namespace, _, selector = text.partition("/")
    if not namespace or not selector:
        raise click.BadParameter(f"expected NAMESPACE/SELECTOR, not {text!r}", param_hint="--wait-for")
    return namespace, selector


def _run_live(
    kubeconfig: str | None,
    server: str | None,
    scheduler_name: str,
    reschedule: bool,
    waits: list[tuple[str, str]],
    wait_seconds: float,
    dry_run: bool,
) -> tuple[Undo, list[str]]:
    from operators.kube import NoCredentials, api_client_factory

    async def main() -> tuple[Undo, list[str]]:
        api = await api_client_factory(server, kubeconfig)()
        try:
            await _wait_until_gone(api, waits, wait_seconds)
            done: Undo | None = None
            failures: list[str] = []
            for _ in range(PASSES):
                undo = what_to_undo(await _listed(server, kubeconfig), scheduler_name, reschedule)
                done = undo if done is None else _merged(done, undo)
                if dry_run or undo.empty:
                    break
                failures = await _apply(api, undo)
            assert done is not None
            return done, failures
        finally:
            await api.close()

    try:
        return asyncio.run(main())
    except NoCredentials as error:
        raise CommandError(f"{error}, or -f PATH (report from a snapshot)") from None


async def _wait_until_gone(api: Any, waits: list[tuple[str, str]], seconds: float) -> None:
    """Until no pod matches any ``waits`` (NAMESPACE, SELECTOR), but those of a node that is not Ready: its kubelet is
    gone, so they never end (and cannot write); they are reported."""
    from operators.kube import read_json

    deadline = time.monotonic() + seconds
    for namespace, selector in waits:
        path = f"/api/v1/namespaces/{urllib.parse.quote(namespace)}/pods"
        while True:
            listed = await read_json(api, path, labelSelector=selector)
            left = [item for item in (listed or {}).get("items") or () if item.get("status", {}).get("phase")
                    not in ("Succeeded", "Failed")]  # fmt: skip
            lost = await _on_lost_nodes(api, left)
            waiting = [item["metadata"]["name"] for item in left if item["metadata"]["name"] not in lost]
            if not waiting:
                if lost:
                    click.echo(f"not waiting for {', '.join(sorted(lost))}: their node is not Ready", err=True)
                break
            if time.monotonic() > deadline:
                raise CommandError(f"pods {', '.join(waiting[:3])} in {namespace} ({selector}) still exist")
            await asyncio.sleep(WAIT_POLL)


async def _on_lost_nodes(api: Any, pods: list[dict[str, Any]]) -> set[str]:
    """The names of ``pods`` bound to a node whose Ready condition is not True (or that is gone)."""
    from operators.kube import read_json

    lost = set()
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            continue
        found = await read_json(api, f"/api/v1/nodes/{urllib.parse.quote(node)}")
        conditions = ((found or {}).get("status") or {}).get("conditions") or ()
        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            lost.add(pod["metadata"]["name"])
    return lost


async def _listed(server: str | None, kubeconfig: str | None) -> Any:
    from operators import compose
    from operators.sources.kinds import CLEANUP_PODS, NODES

    async with asyncio.timeout(120):
        return await compose.snapshot_of(compose.ClusterSource(None, server, kubeconfig), (CLEANUP_PODS, NODES))


async def _apply(api: Any, undo: Undo) -> list[str]:
    """Every write of ``undo``; a pod or node that changed or went meanwhile is left to the next pass."""
    from kubernetes_asyncio.client.exceptions import ApiException

    from operators.engine.status.gates import release_patch
    from operators.kube import API_ERRORS, describe, send_json

    failures: list[str] = []

    async def write(what: str, method: str, path: str, body: Any, content_type: str) -> None:
        try:
            await send_json(api, method, path, body, content_type)
        except ApiException as error:
            if error.status not in (404, 409, 422):  # gone, or changed meanwhile: the next pass decides again
                failures.append(f"{what}: {describe(error)}")
        except API_ERRORS as error:
            failures.append(f"{what}: {describe(error)}")

    for action in undo.delete:
        pod = action.pod
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": pod.uid}}
        await write(f"delete pod {pod.key}", "DELETE", _pod_path(pod.namespace, pod.name), body, "application/json")
    for action in undo.release:
        pod = action.pod
        patch = release_patch(pod)
        await write(f"release pod {pod.key}", "PATCH", _pod_path(pod.namespace, pod.name), patch,
                    "application/json-patch+json")  # fmt: skip
    for node_action in undo.nodes:
        if node_action.patch:
            path = f"/api/v1/nodes/{urllib.parse.quote(node_action.node.name)}/status"
            await write(f"node {node_action.node.name}", "PATCH", path, node_action.patch,
                        "application/merge-patch+json")  # fmt: skip
    return failures


def _pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{urllib.parse.quote(namespace)}/pods/{urllib.parse.quote(name)}"


def _merged(first: Undo, later: Undo) -> Undo:
    """What the passes did together: each later pass's pods and nodes after the first's (a pod counted once)."""
    seen = {action.pod.key for action in (*first.delete, *first.release)}
    nodes = {action.node.name: action for action in (*first.nodes, *later.nodes)}
    return Undo(
        first.delete + tuple(a for a in later.delete if a.pod.key not in seen),
        first.release + tuple(a for a in later.release if a.pod.key not in seen),
        later.left,
        tuple(nodes[name] for name in sorted(nodes)),
    )


def _report(undo: Undo, fmt: str, written: bool) -> None:
    summary = undo.summary()
    if fmt != "table":
        click.echo(output.dump(summary, fmt), nl=False)
        return
    verbs = ("deleted", "released") if written else ("to delete", "to release")
    for action in undo.delete:
        click.echo(one_line(f"pod {action.pod.key}: {verbs[0]} ({action.reason})"))
    for action in undo.release:
        click.echo(one_line(f"pod {action.pod.key}: {verbs[1]} ({action.reason})"))
    for action in undo.left:
        click.echo(one_line(f"pod {action.pod.key}: left ({action.reason})"))
    for node in undo.nodes:
        state = ("cleaned" if written else "to clean") if node.patch else "kept"
        click.echo(one_line(f"node {node.node.name}: {state} ({node.reason})"))
    if undo.empty and not undo.left:
        click.echo("nothing to undo")
