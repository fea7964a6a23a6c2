"""The chart's alerts on what the real components serve: each component runs as a process (against the API emulator
or on a snapshot), is scraped as its PodMonitor scrapes it, a fault is injected, and the scraped samples, healthy,
during the fault and after it, become the input series of Prometheus' own rule engine (``promtool test rules``): the
alert is silent while healthy, fires while the fault lasts its ``for``, and resolves after it.

A scrape stands for Prometheus' as the PodMonitor configures it: the samples of /metrics labelled with
``namespace`` and ``component``, and ``up`` 1 when the scrape answered, 0 when it did not. The fault phases last as
long as an alert's ``for`` needs: a real fault is held (the process stays down, the bad calls go on) while each
phase is scraped.
"""

from __future__ import annotations

import asyncio
import pathlib
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from hack.control_plane import cluster as control_plane
from hack.control_plane.ports import free_port
from operators.emulator import ApiEmulator
from tests.integration.conftest import start_run, stop_replicas
from tests.support.emulated import documents, eventually, holder
from tests.support.prerequisites import require

pytestmark = pytest.mark.integration

ROOT = pathlib.Path(__file__).resolve().parents[2]
NS = "netaware-system"
EXAMPLES = ROOT / "hack" / "examples"
Samples = dict[str, float]  # 'name{labels}' -> value, labels in promtool's series notation


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    promtool, helm = shutil.which("promtool"), control_plane.BIN / "helm"
    require(None if promtool else "no promtool (Debian's prometheus package): hack/control-plane/build.sh installs it")
    require(None if helm.exists() else "no helm: bash hack/control-plane/build.sh")
    rendered = subprocess.run(
        [str(helm), "template", "netaware", str(ROOT / "helm" / "netaware"), "-n", NS,
         "--set", "monitoring.prometheusRule=true", "--show-only", "templates/monitoring.yaml"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    (rule,) = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "PrometheusRule"]
    folder = tmp_path_factory.mktemp("alerts")
    (folder / "rules.yaml").write_text(yaml.safe_dump(rule["spec"]))
    return folder


async def scrape(url: str, component: str, pod: str) -> Samples:
    """One scrape: every sample labelled as the PodMonitor labels it, and ``up``."""
    labels = f'namespace="{NS}", component="{component}", pod="{pod}"'
    try:
        async with aiohttp.ClientSession() as http, http.get(url, timeout=aiohttp.ClientTimeout(total=5)) as answer:
            text = await answer.text()
    except (aiohttp.ClientError, TimeoutError):
        return {f"up{{{labels}}}": 0.0}
    samples = {f"up{{{labels}}}": 1.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            own = ", ".join(f'{key}="{value}"' for key, value in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}{', ' + own if own else ''}}}"] = sample.value
    return samples


def series(phases: list[tuple[list[Samples], int]]) -> list[dict[str, str]]:
    """promtool input series from phases of scrapes, one after the other (a phase of N minutes holds N + 1 samples):
    each phase's scrapes spread over its minutes (a counter grows between two scrapes of a phase by what it grew
    between them, per minute); a series a phase lacks is stale there (gone from the scrape, as Prometheus marks it)."""
    names = sorted({name for scrapes, _ in phases for scraped in scrapes for name in scraped})
    out = []
    for name in names:
        values: list[str] = []
        for scrapes, minutes in phases:
            first, last = scrapes[0].get(name), scrapes[-1].get(name)
            if first is None or last is None:
                values.append(f"stale _x{minutes - 1}" if minutes > 1 else "stale")
            elif last != first and len(scrapes) > 1:  # grew during the phase: that growth each minute
                values.append(f"{first:g}+{last - first:g}x{minutes}")
            else:
                values.append(f"{last:g}x{minutes}")
        out.append({"series": name, "values": " ".join(values)})
    return out


def check(rules: pathlib.Path, name: str, inputs: list[dict[str, str]], expectations: list[dict[str, Any]]) -> None:
    test = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": inputs, "alert_rule_test": expectations}]}  # fmt: skip
    (rules / f"{name}.yaml").write_text(yaml.safe_dump(test))
    done = subprocess.run([str(shutil.which("promtool")), "test", "rules", f"{name}.yaml"], cwd=rules,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def firing(alert: str, at: int, labels: dict[str, str] | None) -> dict[str, Any]:
    """An expectation: at minute ``at``, ``alert`` fires with those labels (their keys only: the annotations are
    the unit tests' to check), or not at all (None)."""
    expected: list[dict[str, Any]] = []
    if labels is not None:
        labels = dict(labels)
        annotations = ANNOTATIONS[alert](labels)  # takes what only the annotations read (``times``) out of labels
        expected.append({"exp_labels": labels, "exp_annotations": annotations})
    return {"eval_time": f"{at}m", "alertname": alert, "exp_alerts": expected}


RUNBOOK = "https://github.com/netaware/netaware/blob/main/docs/operations/alerts.md#"
ANNOTATIONS: dict[str, Callable[[dict[str, str]], dict[str, str]]] = {
    "NetawareExtenderErrors": lambda labels: {
        "summary": f"The extender ({labels['component']}) answers {labels['verb']} with {labels['code']}.",
        "description": "kube-scheduler skips an ignorable extender that errs; its pods are placed without netaware.",
        "runbook_url": RUNBOOK + "netawareextendererrors",
    },
    "NetawareOperatorNoLeader": lambda _: {
        "summary": "No netaware operator replica holds its Lease.",
        "description": "No AppGroup status is written and no gate released until a replica leads.",
        "runbook_url": RUNBOOK + "netawareoperatornoleader",
    },
    "NetawareTasksRestarting": lambda labels: {
        "summary": f"Task {labels['task']} of {labels['pod']} restarted {labels.pop('times')} times in 15 minutes.",
        "runbook_url": RUNBOOK + "netawaretasksrestarting",
    },
    "NetawareWebhookDown": lambda _: {
        "summary": "No netaware webhook replica answers its scrape.",
        "description": "Pods that ask for bandwidth are refused while no replica answers (bandwidthFailurePolicy "
        "Fail); other pods are admitted without their namespace's default bandwidth.",
        "runbook_url": RUNBOOK + "netawarewebhookdown",
    },
}


async def serve(*args: str) -> asyncio.subprocess.Process:
    quiet = asyncio.subprocess.DEVNULL
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "operators.cli", *args, stdout=quiet, stderr=quiet
    )


async def answering(url: str) -> bool:
    try:
        async with aiohttp.ClientSession() as http, http.get(url) as answer:
            return answer.status == 200
    except aiohttp.ClientError:
        return False


async def test_the_extender_errors_alert_fires_on_its_real_error_answers_and_resolves(rules: pathlib.Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    extender = await serve("extender", "--insecure", "--port", str(port), "-f", str(EXAMPLES))
    try:
        await eventually(lambda: answering(base + "/readyz"), within=30)
        metrics = base + "/metrics"
        healthy = [await scrape(metrics, "extender", "e-1"), await scrape(metrics, "extender", "e-1")]
        fault = [await scrape(metrics, "extender", "e-1")]
        async with aiohttp.ClientSession() as http:  # the fault: calls it cannot read (a kube-scheduler misconfigured)
            for _ in range(20):
                async with http.post(base + "/filter", data=b"{}", headers={"Content-Type": "application/json"}) as a:
                    assert a.status == 400
        fault.append(await scrape(metrics, "extender", "e-1"))
        after = [await scrape(metrics, "extender", "e-1"), await scrape(metrics, "extender", "e-1")]
    finally:
        await stop_replicas(extender)
    grown = (
        'netaware_extender_errors_total{namespace="netaware-system", component="extender", pod="e-1", '
        'code="400", verb="filter"}'
    )
    assert fault[-1][grown] - fault[0][grown] == 20  # what the extender itself counted
    labels = {"severity": "warning", "component": "extender", "verb": "filter", "code": "400"}
    check(rules, "extender", series([(healthy, 10), (fault, 15), (after, 20)]), [
        firing("NetawareExtenderErrors", 9, None),  # healthy: silent
        firing("NetawareExtenderErrors", 24, labels),  # erring from 12m, for 10m
        firing("NetawareExtenderErrors", 40, None),  # resolved: no error for 15 minutes
    ])  # fmt: skip


async def test_the_no_leader_alert_fires_when_no_replica_leads_and_resolves_when_one_does(
    emulator: ApiEmulator, rules: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    await emulator.seed(documents("cluster.yaml"))
    ports = [free_port(), free_port()]
    common = ("--components", "appgroup", "--lease-duration", "5", "--renew-deadline", "3", "--retry-period", "1")
    replicas = [
        await start_run(emulator, *common, "--health-port", str(port), "--leader-election-identity", f"o-{i}",
                        output=(tmp_path / f"o-{i}.log").open("w"))
        for i, port in enumerate(ports)
    ]  # fmt: skip
    urls = [f"http://127.0.0.1:{port}/metrics" for port in ports]

    async def both() -> list[Samples]:
        one, two = await scrape(urls[0], "operator", "o-0"), await scrape(urls[1], "operator", "o-1")
        return [{**one, **two}]

    try:
        await eventually(lambda: holder(emulator) in ("o-0", "o-1"), within=30)  # either may win the Lease
        leader = int(holder(emulator)[-1])
        await eventually(lambda: answering(urls[1 - leader]), within=30)
        healthy = await both()
        for replica in replicas:  # the fault: every replica gone (crash-looping, evicted)
            replica.send_signal(signal.SIGKILL)
            await replica.wait()
        fault = await both()
        # the pod restarted (a new identity: the Lease still names the killed one until it expires)
        back = await start_run(emulator, *common, "--health-port", str(ports[leader]), "--leader-election-identity",
                               "o-2", output=(tmp_path / "back.log").open("w"))  # fmt: skip
        replicas.append(back)
        await eventually(lambda: holder(emulator) == "o-2", within=30)
        await eventually(lambda: answering(urls[leader]), within=30)
        await asyncio.sleep(1)
        after = await both()
    finally:
        await stop_replicas(*replicas)
    gauge = (
        f'leader_election_master_status{{namespace="netaware-system", component="operator", pod="o-{leader}", '
        'name="netaware"}'
    )
    assert healthy[0][gauge] == 1.0 and gauge not in fault[0] and after[0][gauge] == 1.0
    labels = {"severity": "critical", "namespace": NS}
    check(rules, "leader", series([(healthy, 5), (fault, 10), (after, 10)]), [
        firing("NetawareOperatorNoLeader", 4, None),
        firing("NetawareOperatorNoLeader", 6, None),  # no leader for 1 minute: pending
        firing("NetawareOperatorNoLeader", 9, labels),  # for 2m
        firing("NetawareOperatorNoLeader", 18, None),  # a replica leads again
    ])  # fmt: skip


async def test_the_webhook_down_alert_fires_while_no_replica_answers_and_resolves(rules: pathlib.Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    args = ("webhook", "--insecure", "--port", str(port), "-f", str(EXAMPLES))
    webhook = await serve(*args)
    try:
        await eventually(lambda: answering(url), within=30)
        healthy = [await scrape(url, "webhook", "w-1")]
        webhook.send_signal(signal.SIGKILL)  # the fault: the only replica gone
        await webhook.wait()
        fault = [await scrape(url, "webhook", "w-1")]
        webhook = await serve(*args)
        await eventually(lambda: answering(url), within=30)
        after = [await scrape(url, "webhook", "w-1")]
    finally:
        await stop_replicas(webhook)
    up = 'up{namespace="netaware-system", component="webhook", pod="w-1"}'
    assert (healthy[0][up], fault[0][up], after[0][up]) == (1.0, 0.0, 1.0)
    labels = {"severity": "critical", "namespace": NS}
    check(rules, "webhook", series([(healthy, 5), (fault, 10), (after, 10)]), [
        firing("NetawareWebhookDown", 4, None),
        firing("NetawareWebhookDown", 9, labels),  # down from 6m, for 2m
        firing("NetawareWebhookDown", 17, None),
    ])  # fmt: skip


async def test_the_tasks_restarting_alert_fires_while_a_loop_keeps_failing_and_resolves(
    emulator: ApiEmulator, rules: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """The fault: a bug in the gate keeper's loop (tests/support/injected.py), held while a file exists; the real
    supervisor restarts the loop with its backoff and counts each restart in what /metrics serves."""
    await emulator.seed(documents("cluster.yaml"))
    port, switch = free_port(), tmp_path / "fault"
    url = f"http://127.0.0.1:{port}/metrics"
    target = "operators.controllers.gates:GateKeeper._pass"  # each start of the loop makes a pass at once
    operator = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.injected", str(switch), target, "run", "--server", emulator.base_url,
        "--components", "appgroup", "--health-port", str(port), "--leader-election-identity", "o-0",
        cwd=ROOT, stdout=(tmp_path / "o-0.log").open("w"), stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    restarts = (
        'netaware_task_restarts_total{namespace="netaware-system", component="operator", pod="o-0", '
        'task="appgroup-gates"}'
    )

    async def counted() -> float:
        return (await scrape(url, "operator", "o-0")).get(restarts, -1.0)

    try:
        await eventually(lambda: holder(emulator) == "o-0", within=30)
        await eventually(lambda: counted_is(counted, lambda value: value == 0), within=30)
        healthy = [await scrape(url, "operator", "o-0")]
        switch.touch()  # from the next pass on, the loop fails at each start: restarted after 0.5 s, 1 s, 2 s...
        fault = [await scrape(url, "operator", "o-0")]
        await emulator.seed([gated_pod()])  # a pod to release: the keeper's next pass
        await eventually(lambda: counted_is(counted, lambda value: value >= 4), within=30)
        switch.unlink()  # the bug gone: the next restart keeps running
        await asyncio.sleep(9)  # past the longest backoff so far (4 s) and the restart after it
        fault.append(await scrape(url, "operator", "o-0"))
        after = [await scrape(url, "operator", "o-0")]
        await asyncio.sleep(2)
        after.append(await scrape(url, "operator", "o-0"))
    finally:
        await stop_replicas(operator)
    times = fault[-1][restarts]
    assert healthy[0][restarts] == 0 and times >= 4 and after[-1][restarts] == times, (times, after[-1][restarts])
    text = (tmp_path / "o-0.log").read_text()
    assert "task appgroup-gates failed; restarting it" in text and f"injected fault in {target}" in text, text
    labels = {"severity": "warning", "pod": "o-0", "task": "appgroup-gates", "times": f"{times:g}"}
    # healthy 0-5m, the restarts within minute 6-7, flat after: the 15-minute window holds all of them until 22m
    check(rules, "restarts", series([(healthy, 5), (fault, 1), (after, 20)]), [
        firing("NetawareTasksRestarting", 5, None),
        firing("NetawareTasksRestarting", 12, labels),  # the window from the series' start: increase() is exact
        firing("NetawareTasksRestarting", 24, None),  # no restart within the last 15 minutes
    ])  # fmt: skip


def gated_pod() -> dict[str, Any]:
    labels = {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": "p1"}
    spec = {"containers": [{"name": "c", "image": "x"}], "schedulingGates": [{"name": "netaware.io/topology-order"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1-0", "namespace": "default", "labels": labels},
            "spec": spec}  # fmt: skip


async def counted_is(read: Callable[[], Any], holds: Callable[[float], bool]) -> bool:
    return holds(await read())
