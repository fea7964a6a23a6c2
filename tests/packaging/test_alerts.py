"""The chart's monitoring: a PodMonitor per component that runs, and the PrometheusRule's alerts, checked and
unit-tested by Prometheus' own promtool (``promtool check rules``, ``promtool test rules`` with series written
here: when each alert fires, and when it does not), each alert linking a runbook section that exists."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.support.chart import ROOT, render
from tests.support.prerequisites import require

NS = "netaware-system"
EVERYTHING = ("--set", "monitoring.podMonitors=true", "--set", "monitoring.prometheusRule=true",
              "--set", "secondScheduler.enabled=true", "--set", "probe.enabled=true",
              "--set", "agent.enabled=true")  # fmt: skip
RUNBOOKS = ROOT / "docs" / "operations" / "alerts.md"


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    require(None if found else "no promtool (Debian's prometheus package): hack/control-plane/build.sh installs it")
    assert found
    return found


def rules(helm: str, *more: str) -> dict[str, Any]:
    (rule,) = [d for d in render(helm, *EVERYTHING, *more) if d["kind"] == "PrometheusRule"]
    return dict(rule["spec"])


def test_a_pod_monitor_for_every_component_that_runs_with_the_labels_prometheus_selects(helm: str) -> None:
    documents = render(helm, *EVERYTHING, "--set", "monitoring.labels.release=kps", "--set", "monitoring.namespace=mon")
    monitors = {d["metadata"]["name"]: d for d in documents if d["kind"] == "PodMonitor"}
    assert sorted(monitors) == [f"t-netaware-{c}" for c in ("agent", "extender", "operator", "probe", "scheduler",
                                                            "webhook")]  # fmt: skip
    ports = {
        name.removeprefix("t-netaware-"): m["spec"]["podMetricsEndpoints"][0]["port"] for name, m in monitors.items()
    }
    assert ports == {"operator": "metrics", "webhook": "metrics", "extender": "metrics", "scheduler": "health",
                     "probe": "health", "agent": "health"}  # fmt: skip
    for monitor in monitors.values():
        assert monitor["metadata"]["namespace"] == "mon" and monitor["metadata"]["labels"]["release"] == "kps"
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NS]}
    (webhook_selector,) = monitors["t-netaware-webhook"]["spec"]["selector"]["matchExpressions"]
    assert webhook_selector["values"] == ["webhook", "webhook-first"]
    # every named port exists on the pods the monitor selects
    pods = {d["metadata"]["labels"]["app.kubernetes.io/component"]: d["spec"]["template"]["spec"] for d in documents
            if d["kind"] in ("Deployment", "DaemonSet")}  # fmt: skip
    for component, port in ports.items():
        spec = pods[component]
        named = {p["name"] for c in spec["containers"] + spec.get("initContainers", []) for p in c.get("ports", [])}
        assert port in named, (component, named)
    # the scraper may reach them: the NetworkPolicies open 8080 to networkPolicy.metrics.from
    policies = {d["metadata"]["name"]: d for d in documents if d["kind"] == "NetworkPolicy"}
    for component in ("operator", "webhook", "extender"):
        ingress = policies[f"t-netaware-{component}"]["spec"]["ingress"]
        assert any(rule["ports"] == [{"port": 8080, "protocol": "TCP"}] and rule["from"] for rule in ingress), component
    assert not [d for d in render(helm) if d["kind"] in ("PodMonitor", "PrometheusRule", "ServiceMonitor")]
    old = render(helm, "--set", "serviceMonitor.enabled=true")  # deprecated: the PodMonitors
    assert sum(1 for d in old if d["kind"] == "PodMonitor") == 3  # operator, webhook, extender


def test_the_alerts_are_valid_rules_and_each_links_a_runbook_section_that_exists(
    helm: str, promtool: str, tmp_path: pathlib.Path
) -> None:
    spec = rules(helm)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(spec))
    checked = subprocess.run([promtool, "check", "rules", str(tmp_path / "rules.yaml")], capture_output=True,
                             text=True, check=False)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    headings = {_anchor(line) for line in RUNBOOKS.read_text().splitlines() if line.startswith("## ")}
    alerts = [rule for group in spec["groups"] for rule in group["rules"]]
    assert len(alerts) == 14
    for alert in alerts:
        url = alert["annotations"]["runbook_url"]
        page, anchor = url.split("#")
        assert page == "https://github.com/netaware/netaware/blob/main/docs/operations/alerts.md"
        assert anchor == alert["alert"].lower() and anchor in headings, alert["alert"]
        assert NS in alert["expr"] or "apiserver_" in alert["expr"], alert["alert"]  # this release's pods only
        assert alert["labels"]["severity"] in ("critical", "warning")
    thresholds = rules(
        helm, "--set-json", "monitoring.alerts.webhookLatencySeconds=0.5", "--set", "monitoring.alerts.for=3m"
    )
    slow = next(r for g in thresholds["groups"] for r in g["rules"] if r["alert"] == "NetawareWebhookSlow")
    assert slow["expr"].rstrip().endswith("> 0.5") and slow["for"] == "3m"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^a-z0-9 -]", "", heading.removeprefix("## ").strip().lower()).replace(" ", "-")


# Series and expectations by hand (interval 1m; `for` as the chart's defaults: 2m for the availability alerts, 10m
# for the rest, 5m for a stale probe row).
UNIT_TESTS = f"""
rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      # both webhook groups down: no replica answers
      - series: 'up{{namespace="{NS}", component="webhook", pod="w-1"}}'
        values: '0x10'
      - series: 'up{{namespace="{NS}", component="webhook-first", pod="f-1"}}'
        values: '0x10'
      # one operator replica leads, then none (the leader lost at 5m, the follower never takes the Lease)
      - series: 'leader_election_master_status{{namespace="{NS}", component="operator", pod="o-1", name="netaware"}}'
        values: '1x4 0x10'
      - series: 'leader_election_master_status{{namespace="{NS}", component="operator", pod="o-2", name="netaware"}}'
        values: '0x15'
      # the extender answers 503 once a minute from 0m
      - series: 'netaware_extender_errors_total{{namespace="{NS}", component="scheduler", verb="filter", code="503"}}'
        values: '0+1x20'
      - series: 'netaware_extender_errors_total{{namespace="{NS}", component="scheduler", verb="prioritize",
          code="503"}}'
        values: '0x20'
      # a probe row confirmed at the epoch (time() 0), never again
      - series: 'netaware_probe_row_confirmed_timestamp_seconds{{namespace="{NS}", component="probe", node="n-1"}}'
        values: '0x20'
    alert_rule_test:
      - eval_time: 1m
        alertname: NetawareWebhookDown
        exp_alerts: []            # pending: down for less than 2m
      - eval_time: 3m
        alertname: NetawareWebhookDown
        exp_alerts:
          - exp_labels: {{severity: critical, namespace: {NS}}}
            exp_annotations:
              summary: No netaware webhook replica answers its scrape.
              description: >-
                Pods that ask for bandwidth are refused while no replica answers (bandwidthFailurePolicy Fail); other
                pods are admitted without their namespace's default bandwidth.
              runbook_url: https://github.com/netaware/netaware/blob/main/docs/operations/alerts.md#netawarewebhookdown
      - eval_time: 4m
        alertname: NetawareOperatorNoLeader
        exp_alerts: []            # o-1 leads
      - eval_time: 6m
        alertname: NetawareOperatorNoLeader
        exp_alerts: []            # no leader since 5m: pending
      - eval_time: 7m
        alertname: NetawareOperatorNoLeader
        exp_alerts:
          - exp_labels: {{severity: critical, namespace: {NS}}}
            exp_annotations:
              summary: No netaware operator replica holds its Lease.
              description: No AppGroup status is written and no gate released until a replica leads.
              runbook_url: https://github.com/netaware/netaware/blob/main/docs/operations/alerts.md#netawareoperatornoleader
      - eval_time: 10m
        alertname: NetawareExtenderErrors
        exp_alerts: []            # errors since 1m (the first rate): pending for 10m
      - eval_time: 12m
        alertname: NetawareExtenderErrors
        exp_alerts:
          - exp_labels: {{severity: warning, component: scheduler, verb: filter, code: "503"}}
            exp_annotations:
              summary: The extender (scheduler) answers filter with 503.
              description: kube-scheduler skips an ignorable extender that errs; its pods are placed without netaware.
              runbook_url: https://github.com/netaware/netaware/blob/main/docs/operations/alerts.md#netawareextendererrors
      - eval_time: 10m
        alertname: NetawareProbeRowStale
        exp_alerts: []            # older than 300 s from 6m: pending until 11m
      - eval_time: 12m
        alertname: NetawareProbeRowStale
        exp_alerts:
          - exp_labels: {{severity: warning, namespace: {NS}, component: probe, node: n-1}}
            exp_annotations:
              summary: The probe on n-1 has not confirmed its row for 12m 0s.
              description: The NetworkTopology's costs for that node age, then drop it when its row expires.
              runbook_url: https://github.com/netaware/netaware/blob/main/docs/operations/alerts.md#netawareproberowstale
  - interval: 1m
    input_series:
      # the watch task restarts three times between 1m and 4m, then keeps running
      - series: 'netaware_task_restarts_total{{namespace="{NS}", component="operator", pod="o-1", task="watch"}}'
        values: '0 0 1 2 3 3x30'
    alert_rule_test:
      - eval_time: 3m
        alertname: NetawareTasksRestarting
        exp_alerts: []            # 2 restarts: not more than 2
      - eval_time: 14m
        alertname: NetawareTasksRestarting
        exp_alerts:
          - exp_labels: {{severity: warning, pod: o-1, task: watch}}
            exp_annotations:
              summary: Task watch of o-1 restarted 3 times in 15 minutes.
              runbook_url: https://github.com/netaware/netaware/blob/main/docs/operations/alerts.md#netawaretasksrestarting
      - eval_time: 25m
        alertname: NetawareTasksRestarting
        exp_alerts: []            # no restart within the last 15 minutes
  - interval: 1m
    input_series:
      # one webhook group answers: pods still get both calls' chance, nothing fires
      - series: 'up{{namespace="{NS}", component="webhook", pod="w-1"}}'
        values: '0x10'
      - series: 'up{{namespace="{NS}", component="webhook-first", pod="f-1"}}'
        values: '1x10'
      - series: 'leader_election_master_status{{namespace="{NS}", component="operator", pod="o-1", name="netaware"}}'
        values: '1x10'
    alert_rule_test:
      - eval_time: 10m
        alertname: NetawareWebhookDown
        exp_alerts: []
      - eval_time: 10m
        alertname: NetawareOperatorNoLeader
        exp_alerts: []
"""


def test_the_alerts_fire_when_and_only_when_their_condition_lasts(
    helm: str, promtool: str, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules(helm)))
    (tmp_path / "tests.yaml").write_text(UNIT_TESTS)
    done = subprocess.run([promtool, "test", "rules", "tests.yaml"], capture_output=True, text=True, cwd=tmp_path,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
