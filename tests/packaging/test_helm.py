"""The Helm chart: lint, render in four configurations, validate every object, and check the
security properties a reviewer would (no RBAC wildcards, non-root read-only containers, a webhook
that never touches kube-system or its own namespace, values checked by values.schema.json)."""

from __future__ import annotations

import functools
import json
import subprocess
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.support.chart import CHART, NAMESPACE, NOT_IN_KUBERNETES, ROOT, SUPPORTED, VARIANTS, containers, render


def test_helm_lint_strict(helm: str) -> None:
    done = subprocess.run([helm, "lint", "--strict", str(CHART)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_rendered_object_is_valid(helm: str, variant: str) -> None:
    documents = render(helm, *VARIANTS[variant])
    kinds = {document["kind"] for document in documents}
    assert {"Deployment", "ClusterRole", "MutatingWebhookConfiguration", "CustomResourceDefinition"} <= kinds
    for document in documents:
        if document["apiVersion"] in NOT_IN_KUBERNETES:
            continue
        text = json.dumps(document, sort_keys=True)
        for version in SUPPORTED:
            _validate(text, version)


@functools.cache
def _validate(document: str, version: str) -> None:
    """One rendered object (as JSON text) checked against one version's schemas, once: variants share most objects."""
    kubernetes_validate.validate(json.loads(document), version, strict=True)


def scheduler_config(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """The second scheduler's KubeSchedulerConfiguration among rendered ``documents``."""
    (config,) = [d for d in documents
                 if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("t-netaware-scheduler-")]  # fmt: skip
    return dict(yaml.safe_load(config["data"]["config.yaml"]))


def test_variants_render_what_they_promise(helm: str) -> None:
    crds = {d["metadata"]["name"] for d in render(helm) if d["kind"] == "CustomResourceDefinition"}
    assert "nodeslos.slo.koordinator.sh" in crds
    no_slo = render(helm, *VARIANTS["no-nodeslo"])
    assert "nodeslos.slo.koordinator.sh" not in {
        d["metadata"]["name"] for d in no_slo if d["kind"] == "CustomResourceDefinition"
    }
    assert any(d["kind"] == "PodMonitor" for d in no_slo)  # serviceMonitor.enabled, deprecated: PodMonitors
    managed = render(helm, *VARIANTS["cert-manager"])
    assert {d["kind"] for d in managed} >= {"Certificate", "Issuer"}
    assert not any(d["kind"] == "Secret" for d in managed)  # cert-manager writes the secrets
    webhook = next(d for d in managed if d["kind"] == "MutatingWebhookConfiguration")
    assert webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].startswith(f"{NAMESPACE}/")
    scheduled = render(helm, *VARIANTS["second-scheduler"])
    rendered = scheduler_config(scheduled)
    assert rendered["percentageOfNodesToScore"] == 100  # plan-ungated plans see every feasible node
    assert rendered["clientConnection"] == {"qps": 50, "burst": 100}  # kube-scheduler's own defaults
    faster = render(helm, *VARIANTS["second-scheduler"], "--set", "secondScheduler.clientConnection.qps=200",
                    "--set", "secondScheduler.clientConnection.burst=400")  # fmt: skip
    assert scheduler_config(faster)["clientConnection"] == {"qps": 200, "burst": 400}
    extender = rendered["extenders"][0]
    assert extender["ignorable"] is True and extender["nodeCacheCapable"] is True and extender["httpTimeout"] == "5s"
    operator = next(d for d in scheduled if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("operator"))
    assert "--components=appgroup,networktopology,nodeslo,nodebandwidth,descheduler" in containers(operator)[0]["args"]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_rbac_has_no_wildcards(helm: str, variant: str) -> None:
    for document in render(helm, *VARIANTS[variant]):
        if document["kind"] in ("Role", "ClusterRole"):
            for rule in document["rules"]:
                for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                    assert "*" not in rule.get(key, []), (document["metadata"]["name"], rule)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_containers_run_as_non_root_with_a_read_only_root(helm: str, variant: str) -> None:
    workloads = [d for d in render(helm, *VARIANTS[variant]) if d["kind"] == "Deployment"]
    assert workloads
    for document in workloads:
        pod = document["spec"]["template"]["spec"]
        for container in containers(document):
            context = container.get("securityContext") or {}
            assert context.get("readOnlyRootFilesystem") is True, container["name"]
            assert context.get("allowPrivilegeEscalation") is False, container["name"]
            assert context.get("capabilities", {}).get("drop") == ["ALL"], container["name"]
            assert context.get("runAsNonRoot", (pod.get("securityContext") or {}).get("runAsNonRoot")) is True
            assert container["resources"]["requests"] and container["resources"]["limits"]
            assert container.get("readinessProbe") and container.get("livenessProbe")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_slow_start_is_not_killed_and_a_busy_process_has_five_seconds_to_answer(helm: str, variant: str) -> None:
    """Every container of the chart the kubelet probes: a startup probe on its health path holds the liveness probe
    back for minutes, and the liveness probe waits 5 s for an answer (an agent starting on a saturated CI node was
    killed after 44 s, exit 137, most likely by the default 1-s liveness probe)."""
    probed = [
        (document["metadata"]["labels"]["app.kubernetes.io/component"], container)
        for document in render(helm, *VARIANTS[variant])
        if document["kind"] in ("Deployment", "DaemonSet")
        for container in containers(document)
        if container.get("livenessProbe")
    ]
    assert {name for name, _ in probed} >= {"operator", "webhook"}
    for name, container in probed:
        startup, liveness = container.get("startupProbe") or {}, container["livenessProbe"]
        assert startup.get("httpGet", {}).get("port") == liveness["httpGet"]["port"], (name, container["name"])
        assert startup["periodSeconds"] * startup["failureThreshold"] >= 300, (name, container["name"])
        assert liveness["timeoutSeconds"] >= 5, (name, container["name"])


def test_webhook_skips_kube_system_and_its_own_namespace(helm: str) -> None:
    entries = next(d for d in render(helm) if d["kind"] == "MutatingWebhookConfiguration")["webhooks"]
    for webhook in entries:
        expression = webhook["namespaceSelector"]["matchExpressions"][0]
        assert expression["key"] == "kubernetes.io/metadata.name" and expression["operator"] == "NotIn"
        assert set(expression["values"]) == {"kube-system", NAMESPACE}
        assert webhook["sideEffects"] == "None" and webhook["clientConfig"]["caBundle"]
    # pods that ask for bandwidth fail closed (never created unaccounted) after one retry; every other pod is never
    # blocked
    assert [(w["name"], w["failurePolicy"]) for w in entries] == [
        ("pod-bandwidth.netaware.io", "Ignore"),
        ("pod-bandwidth-retry.netaware.io", "Fail"),
        ("pod.netaware.io", "Ignore"),
    ]


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ("webhook.replicas=two", "replicas"),
        ("operator.logFormat=xml", "logFormat"),
        ("descheduler.policy.highThresholds.netBandwidth=170", "netBandwidth"),
        ("operator.components={appgroup,gpu}", "components"),
        ("unknownKey=1", "unknownKey"),
    ],
)
def test_wrong_values_are_rejected_by_the_schema(helm: str, setting: str, field: str) -> None:
    done = subprocess.run(
        [helm, "template", "t", str(CHART), "--set", setting], capture_output=True, text=True, check=False
    )
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr and field in done.stderr


def rules_of(documents: list[dict[str, Any]], name_part: str) -> list[dict[str, Any]]:
    role = next(d for d in documents if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith(name_part))
    return list(role["rules"])


def verbs_for(rules: list[dict[str, Any]], resource: str) -> set[str]:
    return {verb for rule in rules if resource in rule["resources"] for verb in rule["verbs"]}


def test_network_policies_admit_each_port_from_its_callers_only(helm: str) -> None:
    policies = {
        d["metadata"]["name"]: d for d in render(helm, *VARIANTS["second-scheduler"]) if d["kind"] == "NetworkPolicy"
    }
    assert len(policies) == 3
    by_component = {name.rsplit("-", 1)[-1]: policy["spec"] for name, policy in policies.items()}
    assert all(spec["policyTypes"] == ["Ingress"] for spec in by_component.values())
    monitoring = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    webhook, webhook_metrics = by_component["webhook"]["ingress"]
    assert webhook["ports"] == [{"port": 9443, "protocol": "TCP"}] and "from" not in webhook
    assert webhook_metrics == {"ports": [{"port": 8080, "protocol": "TCP"}], "from": monitoring}
    extender, extender_metrics = by_component["extender"]["ingress"]
    kube_system = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}
    assert extender["from"] == [kube_system]  # the second scheduler calls the extender in its own pods
    assert extender_metrics == {"ports": [{"port": 8080, "protocol": "TCP"}], "from": monitoring}
    calling = render(helm, *VARIANTS["scheduler-calls-the-service"])
    policy = next(d for d in calling if d["kind"] == "NetworkPolicy" and d["metadata"]["name"].endswith("extender"))
    sources = policy["spec"]["ingress"][0]["from"]
    assert any("podSelector" in peer for peer in sources) and kube_system in sources  # the chart's second scheduler
    (metrics,) = by_component["operator"]["ingress"]
    assert metrics["ports"] == [{"port": 8080, "protocol": "TCP"}]
    assert metrics["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    off = render(helm, "--set", "networkPolicy.enabled=false")
    assert not [d for d in off if d["kind"] == "NetworkPolicy"]


def test_operator_rbac_is_narrowed_to_what_it_writes(helm: str) -> None:
    rules = rules_of(render(helm), "-operator")
    assert verbs_for(rules, "configmaps") == {"get", "list", "watch"}  # read only: nothing creates ConfigMaps
    assert verbs_for(rules, "appgroups") == {"list", "watch"}  # status only: no kopf bookkeeping on them
    assert verbs_for(rules, "nodeslos") == {"list", "watch", "create", "patch", "delete"}
    assert verbs_for(rules, "namespaces") == set()  # the operator never reads namespaces
    koordinator = render(helm, *VARIANTS["no-nodeslo"])
    assert verbs_for(rules_of(koordinator, "-operator"), "nodeslos") == {"list", "watch"}
    operator = next(d for d in koordinator if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-operator"))
    assert "--nodeslo-spec-owner=koordinator" in containers(operator)[0]["args"]
    assert verbs_for(rules_of(render(helm), "-webhook"), "events") == {"create"}
    assert verbs_for(rules_of(render(helm), "-extender"), "events") == {"create"}  # a pod no node fits


def test_ordered_scheduling_values_and_the_one_pod_write(helm: str) -> None:
    default = render(helm)
    assert verbs_for(rules_of(default, "-operator"), "pods") == {"list", "watch", "patch"}  # patch: the gate only
    assert verbs_for(rules_of(default, "-webhook"), "pods") == set()
    without = render(helm, "--set", "operator.components={networktopology,nodeslo}")
    assert verbs_for(rules_of(without, "-operator"), "pods") == {"list", "watch"}  # no AppGroup controller
    deployments = {d["metadata"]["name"].rsplit("-", 1)[-1]: d for d in default if d["kind"] == "Deployment"}
    assert "--ordered-scheduling-timeout=60" in containers(deployments["operator"])[0]["args"]
    assert "--ordered-scheduling-default" not in containers(deployments["webhook"])[0]["args"]
    on = render(helm, "--set", "webhook.orderedSchedulingDefault=true", "--set", "operator.orderedSchedulingTimeout=90")
    deployments = {d["metadata"]["name"].rsplit("-", 1)[-1]: d for d in on if d["kind"] == "Deployment"}
    assert "--ordered-scheduling-default" in containers(deployments["webhook"])[0]["args"]
    assert "--ordered-scheduling-timeout=90" in containers(deployments["operator"])[0]["args"]
    refused = subprocess.run(
        [helm, "template", "t", str(CHART), "--set", "operator.orderedSchedulingTimeout=0"],
        capture_output=True,
        check=False,
        text=True,
    )
    assert refused.returncode != 0 and "orderedSchedulingTimeout" in refused.stderr


def test_the_probe_is_off_by_default_and_writes_configmaps_in_one_namespace_only(helm: str) -> None:
    assert not [d for d in render(helm) if d["kind"] == "DaemonSet"]
    documents = render(helm, *VARIANTS["probe"])
    (daemonset,) = [d for d in documents if d["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    assert "hostNetwork" not in pod  # pod-to-pod latency unless asked
    (container,) = pod["containers"]
    assert "--namespace=net" in container["args"] and "--peers-per-zone=3" in container["args"]
    assert container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in documents}
    rows = roles[("Role", "net", "t-netaware-probe-rows")]["rules"]
    assert rows == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "update"]}]
    peers = roles[("Role", NAMESPACE, "t-netaware-probe")]["rules"]
    assert peers == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]
    nodes = roles[("ClusterRole", None, "t-netaware-probe")]["rules"]
    assert nodes == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}]
    host = render(helm, "--set", "probe.enabled=true", "--set", "probe.hostNetwork=true")
    (daemonset,) = [d for d in host if d["kind"] == "DaemonSet"]
    assert daemonset["spec"]["template"]["spec"]["hostNetwork"] is True
    for bad in ("probe.interval=0", "probe.peersPerZone=0", "probe.port=70000", "probe.unknown=1"):
        refused = subprocess.run(
            [helm, "template", "t", str(CHART), "--set", "probe.enabled=true", "--set", bad],
            capture_output=True,
            text=True,
            check=False,
        )
        assert refused.returncode != 0 and "probe" in refused.stderr, bad


def test_the_grafana_dashboard_is_json_and_asks_only_for_metrics_netaware_exports(helm: str) -> None:
    import json
    import re

    assert not [d for d in render(helm) if d["metadata"]["name"].endswith("-dashboard")]
    (config_map,) = [
        d
        for d in render(helm, "--set", "grafanaDashboard.enabled=true")
        if d["metadata"]["name"].endswith("-dashboard")
    ]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config_map["data"]["netaware.json"])
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(dashboard["panels"]) == 10 and len({panel["id"] for panel in dashboard["panels"]}) == 10
    source = "\n".join(
        path.read_text() for folder in ("operators", "webhooks") for path in (ROOT / folder).rglob("*.py")
    )
    exported = set(re.findall(r'"((?:netaware|controller_runtime|descheduler|workqueue)_[a-z_]+)"', source))
    for expr in exprs:
        for name in re.findall(r"\b((?:netaware|controller_runtime|descheduler)_[a-z_]+?)(?:_bucket|_total)?\{", expr):
            assert name in exported, f"{name} (in {expr}) is not a metric netaware exports"
    for panel in dashboard["panels"]:  # panels do not overlap on Grafana's 24-column grid
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24


def _operator_args(documents: list[dict[str, Any]]) -> list[str]:
    operator = next(d for d in documents if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("operator"))
    return list(containers(operator)[0]["args"])


def _webhook_args(documents: list[dict[str, Any]]) -> list[str]:
    webhook = next(d for d in documents if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("webhook"))
    return list(containers(webhook)[0]["args"])


def _operator_rules(documents: list[dict[str, Any]]) -> list[tuple[str, str]]:
    role = next(d for d in documents if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("operator"))
    return [(resource, verb) for rule in role["rules"] for resource in rule["resources"] for verb in rule["verbs"]]


def test_the_bandwidth_guarantee_wires_the_webhook_the_operator_and_its_rbac(helm: str) -> None:
    default = render(helm)
    assert "--components=appgroup,networktopology,nodeslo,nodebandwidth" in _operator_args(default)
    assert "--accounting-mode=duplex" in _operator_args(default)
    assert not any(a.startswith("--default-node-bandwidth") for a in _operator_args(default))
    assert "--bandwidth-resources=duplex" in _webhook_args(default)
    assert ("nodes/status", "patch") in _operator_rules(default)
    combined = render(helm, *VARIANTS["combined"])
    assert {"--accounting-mode=combined", "--default-node-bandwidth=10G"} <= set(_operator_args(combined))
    assert "--bandwidth-resources=combined" in _webhook_args(combined)
    extender = render(helm, *VARIANTS["extender-guarantee"])
    assert "--components=appgroup,networktopology,nodeslo" in _operator_args(extender)
    assert not any(a.startswith("--bandwidth-resources") for a in _webhook_args(extender))
    assert ("nodes/status", "patch") not in _operator_rules(extender)


def test_the_descheduler_knows_the_capacity_the_scheduler_knows(helm: str) -> None:
    """bandwidth.defaultNodeBandwidth is the capacity of a node nothing else describes, for the descheduler too: a
    chart that gave it only to the scheduler and the nodebandwidth component left LowNodeLoad skipping every such
    node ("no network bandwidth capacity"), so it never evicted there."""
    from operators.api.config.descheduler import parse_policy

    def policy(*args: str) -> Any:
        documents = render(helm, "--set", "descheduler.enabled=true", *args)
        (config,) = [d for d in documents if d["kind"] == "ConfigMap" and "policy.yaml" in d.get("data", {})]
        return parse_policy(yaml.safe_load(config["data"]["policy.yaml"])).args

    assert policy("--set", "bandwidth.defaultNodeBandwidth=1G").default_node_bandwidth == "1G"
    assert policy().default_node_bandwidth is None  # unset: a node nothing describes is skipped, as documented


@pytest.mark.parametrize(("variant", "policy"), [("default", "Fail"), ("extender-guarantee", None)])
def test_the_charts_webhook_entries_are_the_python_renderings(helm: str, variant: str, policy: str | None) -> None:
    """The chart's MutatingWebhookConfiguration and webhooks/configuration.py (the e2e tests') say the same."""
    from webhooks.configuration import mutating_webhook_configuration

    rendered = next(d for d in render(helm, *VARIANTS[variant]) if d["kind"] == "MutatingWebhookConfiguration")
    python = mutating_webhook_configuration("x", "x", NAMESPACE, bandwidth_failure_policy=policy)
    strip = [{k: v for k, v in entry.items() if k != "clientConfig"} for entry in rendered["webhooks"]]
    assert strip == [{k: v for k, v in entry.items() if k != "clientConfig"} for entry in python["webhooks"]]


@pytest.mark.parametrize(("variant", "mode", "default"), [("default", "duplex", None), ("combined", "combined", "10G")])
def test_the_extender_counts_in_the_charts_accounting_mode(
    helm: str, variant: str, mode: str, default: str | None
) -> None:
    from operators.api.config.scheduler import parse_config

    documents = render(helm, *VARIANTS[variant])
    extender = next(d for d in documents if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("extender"))
    assert "--config=/etc/netaware/config/config.yaml" in containers(extender)[0]["args"]
    config_map = next(
        d for d in documents if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("t-netaware-extender-")
    )
    config = parse_config(yaml.safe_load(config_map["data"]["config.yaml"]))
    assert config.bandwidth.accounting_mode == mode
    assert (
        str(config.bandwidth.default_node_bandwidth) if config.bandwidth.default_node_bandwidth else None
    ) == default
    # the defaults kept: kube-scheduler's default profile's filters the engine models, and netaware's two
    assert set(config.filters) == {"NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts",
                                   "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding",
                                   "VolumeZone", "PodTopologySpread", "InterPodAffinity", "NetworkOverhead",
                                   "NetworkBandwidth"}  # fmt: skip
    from operators.extender.answers import ExtenderState

    # kube-scheduler runs its own filters before calling the extender, which answers for netaware's only
    assert set(ExtenderState(lambda: None, config).config.filters) == {"NetworkOverhead", "NetworkBandwidth"}  # type: ignore[arg-type,return-value]


def test_the_agent_is_off_by_default_runs_with_net_admin_only_and_reads_only_its_node(helm: str) -> None:
    assert not [d for d in render(helm) if d["metadata"]["name"].endswith("-agent")]
    documents = render(helm, *VARIANTS["agent"])
    (daemonset,) = [d for d in documents if d["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True  # the node's NIC, qdiscs and nftables
    (container,) = pod["containers"]
    context = container["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"], "add": ["NET_ADMIN"]}
    assert "privileged" not in context and context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert "--interface=eth1" in container["args"] and "--publish-capacity" in container["args"]
    assert f"--cleanup-on-uninstall={NAMESPACE}/t-netaware-agent" in container["args"]
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in documents}
    assert roles[("ClusterRole", None, "t-netaware-agent")]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
        {"apiGroups": ["slo.koordinator.sh"], "resources": ["nodeslos"], "verbs": ["list", "watch"]},
        {"apiGroups": ["slo.koordinator.sh"], "resources": ["nodeslos/status"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ]
    assert roles[("Role", NAMESPACE, "t-netaware-agent")]["rules"] == [
        {"apiGroups": ["apps"], "resources": ["daemonsets"], "resourceNames": ["t-netaware-agent"], "verbs": ["get"]}
    ]
    without = render(helm, "--set", "agent.enabled=true")
    nodes = next(d for d in without if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "t-netaware-agent")
    assert nodes["rules"][0]["verbs"] == ["list", "watch"]  # nodes: patch only with publishCapacity


def test_the_terway_agent_writes_the_hosts_terway_directory_with_no_capability_and_no_usage_rights(helm: str) -> None:
    documents = render(helm, *VARIANTS["agent-terway"])
    (daemonset,) = [d for d in documents if d["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "--backend=terway-qos" in container["args"] and "--terway-qos-dir=/var/lib/terway/qos" in container["args"]
    assert "--terway-qos-cgroup-driver=systemd" in container["args"]
    assert "--terway-qos-cgroup-root=/sys/fs/cgroup/net_cls" in container["args"]
    assert container["volumeMounts"] == [{"name": "terway-qos", "mountPath": "/var/lib/terway/qos"}]
    assert pod["volumes"] == [
        {"name": "terway-qos", "hostPath": {"path": "/var/lib/terway/qos", "type": "DirectoryOrCreate"}}
    ]
    (role,) = [d for d in documents if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "t-netaware-agent"]
    assert {"apiGroups": ["slo.koordinator.sh"], "resources": ["nodeslos/status"], "verbs": ["patch"]} not in role[
        "rules"
    ]  # it measures nothing, so writes no usage
    refused = subprocess.run(
        [helm, "template", "t", str(CHART), "--set", "agent.enabled=true", "--set", "agent.backend=ebpf"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode != 0 and "/agent/backend': value must be one of 'tc', 'terway-qos'" in refused.stderr


def test_a_scheduler_reaches_one_extender_replica(helm: str) -> None:
    """The plans of plan-ungated AppGroups live in one extender process's memory: its Service keeps a client (the
    scheduler) on one replica; the webhook's keeps no affinity."""
    services = {d["metadata"]["name"].rsplit("-", 1)[-1]: d for d in render(helm) if d["kind"] == "Service"}
    assert services["extender"]["spec"]["sessionAffinity"] == "ClientIP"
    assert "sessionAffinity" not in services["webhook"]["spec"]


def notes(helm: str, *args: str) -> str:
    """What `helm install` prints after installing (NOTES.txt), rendered without a cluster."""
    done = subprocess.run([helm, "install", "t", str(CHART), "-n", NAMESPACE, "--dry-run=client", *args],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.split("NOTES:", 1)[1]


def test_the_install_notes_name_the_image_value_while_it_is_the_unpublished_default(helm: str) -> None:
    assert "WARNING: image.repository is ghcr.io/netaware/netaware, which netaware does not publish" in notes(helm)
    assert "hack/image.sh --push REGISTRY/REPO:TAG" in notes(helm)
    assert "WARNING" not in notes(helm, "--set", "image.repository=registry.example.com/team/netaware")


def test_the_second_scheduler_gets_the_appgroups_pods_through_the_webhook(helm: str) -> None:
    def webhook_args(*args: str) -> list[str]:
        rendered = render(helm, *args)
        webhook = next(d for d in rendered if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("webhook"))
        return list(containers(webhook)[0]["args"])

    assert "--scheduler-name=network-aware-scheduler" in webhook_args(*VARIANTS["second-scheduler"])
    assert not any(a.startswith("--scheduler-name") for a in webhook_args())  # no second scheduler: no rule
    off = webhook_args(*VARIANTS["second-scheduler"], "--set", "secondScheduler.appGroupPods=false")
    assert not any(a.startswith("--scheduler-name") for a in off)
    # the pods of plans keep their scheduler, unless only the extender would check bandwidth or hold the plan
    keep = "--plan-pods-keep-scheduler"
    assert keep in webhook_args(*VARIANTS["second-scheduler"])
    assert keep not in off
    for value in ("secondScheduler.planPods=true", "bandwidth.guarantee=extender", "operator.planAffinity=preferred"):
        assert keep not in webhook_args(*VARIANTS["second-scheduler"], "--set", value), value
    assert "The webhook sets it on every AppGroup's pods" in notes(helm, *VARIANTS["second-scheduler"])
