"""The chart as a platform team runs it for months (rendered and checked; the e2e tier installs, upgrades and
uninstalls it): CRDs kept, PodDisruptionBudgets only where they can be met, replicas spread, consumers of a file rolled
by its checksum, the second scheduler highly available with its own extender, graceful stops, stable TLS with
cert-manager, the uninstall's cleanup, and a Kubernetes version range that the templates agree with."""

from __future__ import annotations

import hashlib
import json
import subprocess
from typing import Any

import yaml

from tests.support.chart import CHART, NAMESPACE, VARIANTS, containers, render

SCHEDULER = "t-netaware-scheduler"


def by_kind(documents: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in documents if d["kind"] == kind}


def deployment(documents: list[dict[str, Any]], component: str) -> dict[str, Any]:
    return by_kind(documents, "Deployment")[f"t-netaware-{component}"]


def pod_spec(documents: list[dict[str, Any]], component: str) -> dict[str, Any]:
    return dict(deployment(documents, component)["spec"]["template"]["spec"])


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_the_crds_are_kept_on_uninstall_and_when_a_switch_stops_rendering_them(helm: str) -> None:
    crds = by_kind(render(helm), "CustomResourceDefinition")
    assert len(crds) == 3
    for crd in crds.values():
        assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
        assert crd["metadata"]["labels"] == {"app.kubernetes.io/part-of": "netaware"}  # the rest of the file as it was
        assert crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    unkept = by_kind(render(helm, "--set", "crds.keep=false"), "CustomResourceDefinition")
    assert all("annotations" not in crd["metadata"] for crd in unkept.values())


def test_a_pod_disruption_budget_only_where_the_component_has_more_than_one_replica(helm: str) -> None:
    budgets = by_kind(render(helm, *VARIANTS["second-scheduler"]), "PodDisruptionBudget")
    assert sorted(budgets) == [f"t-netaware-{c}" for c in ("extender", "operator", "scheduler", "webhook")]
    assert all(budget["spec"]["minAvailable"] == 1 for budget in budgets.values())
    single = render(helm, "--set", "webhook.replicas=1", "--set", "operator.replicas=1")
    assert sorted(by_kind(single, "PodDisruptionBudget")) == ["t-netaware-extender"]  # the only one left at 2
    budgets = by_kind(render(helm, "--set", "podDisruptionBudget.maxUnavailable=1"), "PodDisruptionBudget")
    budget = budgets["t-netaware-webhook"]
    assert budget["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": {"app.kubernetes.io/name": "netaware", "app.kubernetes.io/instance": "t",
                                     "app.kubernetes.io/component": "webhook"}},
    }  # fmt: skip
    assert not by_kind(render(helm, "--set", "podDisruptionBudget.enabled=false"), "PodDisruptionBudget")


def test_every_deployment_spreads_its_replicas_over_nodes_and_zones_unless_told_otherwise(helm: str) -> None:
    documents = render(helm, *VARIANTS["second-scheduler"])
    for component in ("operator", "webhook", "extender", "scheduler"):
        spec = pod_spec(documents, component)
        selector = {"app.kubernetes.io/name": "netaware", "app.kubernetes.io/instance": "t",
                    "app.kubernetes.io/component": component}  # fmt: skip
        assert spec["topologySpreadConstraints"] == [
            {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": {"matchLabels": selector}, "matchLabelKeys": ["pod-template-hash"]}
            for key in ("kubernetes.io/hostname", "topology.kubernetes.io/zone")
        ], component  # fmt: skip
        assert spec["priorityClassName"] == "system-cluster-critical", component
    own = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"x": "y"}}}]}}  # fmt: skip
    told = render(
        helm,
        "--set-json", "webhook.topologySpreadConstraints=[]",
        "--set-json", f"extender.affinity={json.dumps(own)}",
        "--set", "operator.priorityClassName=mine",
        "--set", "priorityClassName=",
        "--set", "nodeSelector.pool=system",
        "--set", "webhook.nodeSelector.pool=edge",
    )  # fmt: skip
    assert "topologySpreadConstraints" not in pod_spec(told, "webhook")
    assert pod_spec(told, "extender")["affinity"] == own
    assert "affinity" not in pod_spec(told, "webhook")
    assert pod_spec(told, "operator")["priorityClassName"] == "mine"
    assert "priorityClassName" not in pod_spec(told, "webhook")  # no chart-wide class: none
    assert pod_spec(told, "webhook")["nodeSelector"] == {"pool": "edge"}  # the component's own wins
    assert pod_spec(told, "operator")["nodeSelector"] == {"pool": "system"}  # else the chart-wide one


def scheduler_config(documents: list[dict[str, Any]]) -> dict[str, Any]:
    (config,) = [d for n, d in by_kind(documents, "ConfigMap").items() if n.startswith(f"{SCHEDULER}-")]
    return config


def config_volumes(documents: list[dict[str, Any]], component: str) -> dict[str, str]:
    """volume name -> the ConfigMap it mounts, in ``component``'s pod template."""
    volumes = pod_spec(documents, component)["volumes"]
    return {volume["name"]: volume["configMap"]["name"] for volume in volumes if "configMap" in volume}


def test_every_pod_that_reads_a_file_at_start_mounts_the_configmap_named_after_its_content(helm: str) -> None:
    """A configuration ConfigMap is named after the file it holds (the first 10 hex digits of its SHA-256): a changed
    value changes every reader's pod template (all roll), and a pod of an older template (started while a rollout
    scales its ReplicaSet) mounts its own revision's file, never a newer one. (The webhook takes the accounting mode
    as an argument, which rolls it by itself.)"""
    values = [*VARIANTS["second-scheduler"], "--set", "operator.appGroupPlans=true"]

    def mounted(*more: str) -> dict[str, dict[str, str]]:
        documents = render(helm, *values, *more)
        configs = by_kind(documents, "ConfigMap")
        for name, config in configs.items():
            if name.startswith(("t-netaware-extender-", "t-netaware-scheduler-", "t-netaware-descheduler-")):
                (text,) = config["data"].values()  # the file, less the newline its block scalar ends with
                assert name.rsplit("-", 1)[1] == sha256(text.removesuffix("\n"))[:10], name
        readers = {c: config_volumes(documents, c) for c in ("extender", "scheduler", "operator")}
        assert all(name in configs for volumes in readers.values() for name in volumes.values())
        assert readers["extender"]["config"] == readers["scheduler"]["extender-config"]
        assert readers["extender"]["config"] == readers["operator"]["plan-config"]
        return readers

    before = mounted()
    assert before["operator"]["policy"].startswith("t-netaware-descheduler-")
    assert before["scheduler"]["config"].startswith(f"{SCHEDULER}-")
    combined = mounted("--set", "bandwidth.accountingMode=combined")
    for reader in ("extender", "scheduler", "operator"):
        assert before[reader] != combined[reader], reader
    others = mounted("--set", "secondScheduler.percentageOfNodesToScore=50")
    assert others["extender"] == before["extender"] and others["scheduler"]["config"] != before["scheduler"]["config"]


def test_the_extender_looks_appgroups_up_where_the_values_say(helm: str) -> None:
    documents = render(helm, "--set-json", 'extender.networkOverhead.namespaces=["shop","ops"]',
                       "--set", "extender.networkOverhead.networkTopologyName=dc")  # fmt: skip
    (config,) = [d for n, d in by_kind(documents, "ConfigMap").items() if n.startswith("t-netaware-extender-")]
    from operators.api.config.scheduler import parse_config

    parsed = parse_config(yaml.safe_load(config["data"]["config.yaml"]))
    assert (parsed.overhead.namespaces, parsed.overhead.network_topology_name) == (("shop", "ops"), "dc")
    assert parsed.overhead.weights_name == "UserDefined"


def test_the_second_scheduler_runs_two_replicas_under_a_lease_each_with_its_own_extender(helm: str) -> None:
    documents = render(helm, *VARIANTS["second-scheduler"], "--kube-version", "1.34.2")
    scheduler = deployment(documents, "scheduler")
    assert scheduler["spec"]["replicas"] == 2
    config = yaml.safe_load(scheduler_config(documents)["data"]["config.yaml"])
    assert config["leaderElection"] == {"leaderElect": True, "resourceLock": "leases", "resourceNamespace": NAMESPACE,
                                        "resourceName": SCHEDULER, "leaseDuration": "15s", "renewDeadline": "10s",
                                        "retryPeriod": "1s"}  # fmt: skip
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == "http://127.0.0.1:8888" and "tlsConfig" not in extender
    spec = scheduler["spec"]["template"]["spec"]
    (sidecar,) = spec["initContainers"]
    assert sidecar["restartPolicy"] == "Always"  # a native sidecar: up and synced before kube-scheduler starts
    assert sidecar["startupProbe"]["httpGet"] == {"path": "/readyz", "port": "health", "scheme": "HTTP"}
    assert {"--insecure", "--listen-address=127.0.0.1", "--port=8888", "--health-port=8080"} <= set(sidecar["args"])
    (main,) = spec["containers"]
    assert main["image"] == "registry.k8s.io/kube-scheduler:v1.34.2"  # the cluster's own version
    managed = render(helm, *VARIANTS["second-scheduler"], "--kube-version", "v1.33.5-eks-3025e55")
    assert pod_spec(managed, "scheduler")["containers"][0]["image"] == "registry.k8s.io/kube-scheduler:v1.33.5"
    pinned = render(helm, *VARIANTS["second-scheduler"], "--set", "secondScheduler.image=r.example/ks:v9")
    assert pod_spec(pinned, "scheduler")["containers"][0]["image"] == "r.example/ks:v9"
    # its extender reads what the extender Deployment's does, with the scheduler's ServiceAccount
    bindings = by_kind(documents, "ClusterRoleBinding")
    assert {"kind": "ServiceAccount", "name": SCHEDULER, "namespace": NAMESPACE} in bindings["t-netaware-extender"][
        "subjects"
    ]
    # its Lease: created, and read and renewed by name only, in the release namespace
    roles = by_kind(documents, "Role")
    assert roles[f"{SCHEDULER}-leader-election"]["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [SCHEDULER],
         "verbs": ["get", "update"]},
    ]  # fmt: skip
    binding = by_kind(documents, "RoleBinding")[f"{SCHEDULER}-leader-election"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SCHEDULER, "namespace": NAMESPACE}]


def test_a_second_scheduler_that_calls_the_extender_service_rolls_when_its_ca_changes(helm: str) -> None:
    documents = render(helm, *VARIANTS["scheduler-calls-the-service"])
    config = yaml.safe_load(scheduler_config(documents)["data"]["config.yaml"])
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == f"https://t-netaware-extender.{NAMESPACE}.svc:443"
    assert extender["tlsConfig"] == {"caFile": "/etc/netaware/extender-ca/ca.crt"}
    spec = pod_spec(documents, "scheduler")
    assert "initContainers" not in spec
    webhook = next(iter(by_kind(documents, "MutatingWebhookConfiguration").values()))
    bundle = webhook["webhooks"][0]["clientConfig"]["caBundle"]
    annotations = deployment(documents, "scheduler")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["checksum/extender-ca"] == sha256(bundle)
    arguments = [*VARIANTS["scheduler-calls-the-service"], "--set", "extender.enabled=false"]
    refused = subprocess.run(
        [helm, "template", "t", str(CHART), *arguments], capture_output=True, text=True, check=False
    )
    assert refused.returncode != 0 and "it needs extender.enabled=true" in refused.stderr


def test_the_servers_stop_gracefully_and_roll_one_replica_at_a_time(helm: str) -> None:
    documents = render(helm, "--set", "extender.shutdownDelaySeconds=8")
    for component, delay in (("webhook", 5), ("extender", 8)):
        spec = pod_spec(documents, component)
        assert f"--shutdown-delay={delay}" in spec["containers"][0]["args"], component
        assert spec["terminationGracePeriodSeconds"] == delay + 30  # the delay, then in-flight requests finish
        strategy = deployment(documents, component)["spec"]["strategy"]
        assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    assert pod_spec(documents, "operator")["terminationGracePeriodSeconds"] == 30


def test_the_webhook_retries_the_pods_that_ask_for_bandwidth_through_a_second_entry(helm: str) -> None:
    from webhooks.configuration import ASKS_FOR_BANDWIDTH, NOT_ADMITTED

    (webhook,) = by_kind(render(helm), "MutatingWebhookConfiguration").values()
    entries = {entry["name"]: entry for entry in webhook["webhooks"]}
    first, retry, plain = (entries[name] for name in ("pod-bandwidth.netaware.io", "pod-bandwidth-retry.netaware.io",
                                                       "pod.netaware.io"))  # fmt: skip
    assert [first["failurePolicy"], retry["failurePolicy"], plain["failurePolicy"]] == ["Ignore", "Fail", "Ignore"]
    # one path, which every release serves: the new configuration reaches old replicas during an upgrade
    assert {entry["clientConfig"]["service"]["path"] for entry in (first, retry, plain)} == {"/mutate-pods"}
    assert [c["expression"] for c in retry["matchConditions"]] == [ASKS_FOR_BANDWIDTH, NOT_ADMITTED]
    assert "'netaware.io/admitted' in object.metadata.annotations" in NOT_ADMITTED
    assert first["clientConfig"]["caBundle"] == retry["clientConfig"]["caBundle"] == plain["clientConfig"]["caBundle"]


def test_pods_that_ask_for_bandwidth_go_first_to_replicas_of_their_own_kept_off_the_other_groups_nodes(
    helm: str,
) -> None:
    documents = render(helm)
    (webhook,) = by_kind(documents, "MutatingWebhookConfiguration").values()
    services = {entry["name"]: entry["clientConfig"]["service"]["name"] for entry in webhook["webhooks"]}
    # the first group is the first entry's: while an upgrade from a release without it starts its replicas, a
    # failed first call is ignored and the retry goes to the replicas that were there
    assert services == {
        "pod-bandwidth.netaware.io": "t-netaware-webhook-first",
        "pod-bandwidth-retry.netaware.io": "t-netaware-webhook",
        "pod.netaware.io": "t-netaware-webhook",
    }
    first = deployment(documents, "webhook-first")
    assert first["spec"]["replicas"] == 1
    assert by_kind(documents, "Service")["t-netaware-webhook-first"]["spec"]["selector"] == {
        "app.kubernetes.io/name": "netaware", "app.kubernetes.io/instance": "t",
        "app.kubernetes.io/component": "webhook-first"}  # fmt: skip
    spec = pod_spec(documents, "webhook-first")
    other = pod_spec(documents, "webhook")
    assert spec["containers"][0]["args"] == other["containers"][0]["args"]  # the same server, configured alike
    assert spec["serviceAccountName"] == other["serviceAccountName"] == "t-netaware-webhook"
    assert spec["volumes"][0]["secret"]["secretName"] == "t-netaware-webhook-first-tls"
    assert spec["affinity"] == {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {
            "app.kubernetes.io/name": "netaware", "app.kubernetes.io/instance": "t",
            "app.kubernetes.io/component": "webhook"}}}}]}}  # fmt: skip
    assert "affinity" not in other
    # one replica: no budget (it would block drains); the other group's two keep theirs
    assert sorted(by_kind(documents, "PodDisruptionBudget")) == ["t-netaware-extender", "t-netaware-operator",
                                                                 "t-netaware-webhook"]  # fmt: skip
    policy = by_kind(documents, "NetworkPolicy")["t-netaware-webhook"]["spec"]["podSelector"]
    assert policy["matchExpressions"] == [
        {"key": "app.kubernetes.io/component", "operator": "In", "values": ["webhook", "webhook-first"]}
    ]
    placed = pod_spec(render(helm, "--set", "webhook.first.nodeSelector.pool=b", "--set", "webhook.nodeSelector.pool=a",
                             "--set-json", 'webhook.first.affinity={"x": {}}'), "webhook-first")  # fmt: skip
    assert (placed["nodeSelector"], placed["affinity"]) == ({"pool": "b"}, {"x": {}})
    for args in (["--set", "webhook.first.replicas=0"], list(VARIANTS["extender-guarantee"])):
        documents = render(helm, *args)
        assert "t-netaware-webhook-first" not in by_kind(documents, "Deployment")
        assert "t-netaware-webhook-first-tls" not in by_kind(documents, "Secret")
        (webhook,) = by_kind(documents, "MutatingWebhookConfiguration").values()
        assert {entry["clientConfig"]["service"]["name"] for entry in webhook["webhooks"]} == {"t-netaware-webhook"}


def test_cert_manager_signs_the_servers_with_a_ca_of_the_releases_own(helm: str) -> None:
    documents = render(helm, *VARIANTS["cert-manager"])
    issuers = by_kind(documents, "Issuer")
    certificates = by_kind(documents, "Certificate")
    assert issuers["t-netaware-selfsigned"]["spec"] == {"selfSigned": {}}
    ca = certificates["t-netaware-ca"]["spec"]
    assert ca["isCA"] is True and ca["secretName"] == "t-netaware-ca" and ca["duration"] == "87600h"
    assert ca["issuerRef"] == {"name": "t-netaware-selfsigned", "kind": "Issuer", "group": "cert-manager.io"}
    assert issuers["t-netaware-ca"]["spec"] == {"ca": {"secretName": "t-netaware-ca"}}
    for component in ("webhook", "webhook-first", "extender"):
        leaf = certificates[f"t-netaware-{component}"]["spec"]
        assert leaf["issuerRef"] == {"name": "t-netaware-ca", "kind": "Issuer", "group": "cert-manager.io"}
        assert leaf["secretName"] == f"t-netaware-{component}-tls"
        assert (leaf["duration"], leaf["renewBefore"]) == ("2160h", "720h")
    (webhook,) = by_kind(documents, "MutatingWebhookConfiguration").values()
    # cainjector writes the leaf's ca.crt: the CA, which a renewal of the leaf does not change
    assert webhook["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/t-netaware-webhook"}
    assert not by_kind(documents, "Secret")
    own = render(helm, *VARIANTS["cert-manager"], "--set", "tls.certManager.issuerRef.name=corp-ca",
                 "--set", "tls.certManager.issuerRef.kind=ClusterIssuer")  # fmt: skip
    assert not by_kind(own, "Issuer") and "t-netaware-ca" not in by_kind(own, "Certificate")
    assert by_kind(own, "Certificate")["t-netaware-webhook"]["spec"]["issuerRef"] == {
        "name": "corp-ca",
        "kind": "ClusterIssuer",
    }


def test_the_generated_ca_is_kept_in_a_secret_and_signs_both_servers(helm: str) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    documents = render(helm)
    secrets = by_kind(documents, "Secret")
    ca_pem = secrets["t-netaware-ca"]["data"]["tls.crt"]
    ca = x509.load_pem_x509_certificate(_b64(ca_pem))
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    # ECDSA P-256, as cert-manager's keys (an RSA-2048 key made at every render cost helm 0.1 s of CPU per key)
    for name in ("t-netaware-ca", *(f"t-netaware-{c}-tls" for c in ("webhook", "webhook-first", "extender"))):
        key = load_pem_private_key(_b64(secrets[name]["data"]["tls.key"]), None)
        assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1", name
    for component in ("webhook", "webhook-first", "extender"):
        data = secrets[f"t-netaware-{component}-tls"]["data"]
        assert data["ca.crt"] == ca_pem
        leaf = x509.load_pem_x509_certificate(_b64(data["tls.crt"]))
        leaf.verify_directly_issued_by(ca)
        names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName
        )
        assert names == [
            f"t-netaware-{component}.{NAMESPACE}.svc",
            f"t-netaware-{component}.{NAMESPACE}.svc.cluster.local",
        ]
    (webhook,) = by_kind(documents, "MutatingWebhookConfiguration").values()
    assert _b64(webhook["webhooks"][0]["clientConfig"]["caBundle"]).strip() == _b64(ca_pem).strip()


def test_the_uninstall_cleanup_is_a_post_delete_job_with_the_rights_it_uses(helm: str) -> None:
    hook = {"helm.sh/hook": "post-delete", "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded"}
    documents = render(helm, *VARIANTS["second-scheduler"])
    job = by_kind(documents, "Job")["t-netaware-cleanup"]
    assert job["metadata"]["annotations"] == hook
    spec = job["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "t-netaware-cleanup" and spec["restartPolicy"] == "Never"
    (container,) = spec["containers"]
    assert container["args"] == [
        "cleanup",
        f"--wait-for={NAMESPACE}/app.kubernetes.io/instance=t,app.kubernetes.io/component in (operator,webhook)",
        "--wait-seconds=150",
        "--scheduler-name=network-aware-scheduler",
        "--reschedule-pending",
    ]
    assert job["spec"]["activeDeadlineSeconds"] == 300
    for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
        assert by_kind(documents, kind)["t-netaware-cleanup"]["metadata"]["annotations"] == {
            **hook, "helm.sh/hook-weight": "-5"}, kind  # fmt: skip
    assert by_kind(documents, "ClusterRole")["t-netaware-cleanup"]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "get"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
    ]
    plain = by_kind(render(helm, "--set", "uninstall.reschedulePendingPods=false"), "Job")["t-netaware-cleanup"]
    args = plain["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--reschedule-pending" not in args and not any(a.startswith("--scheduler-name") for a in args)
    assert not by_kind(render(helm, "--set", "uninstall.cleanup=false"), "Job")


def test_the_supported_kubernetes_versions_are_those_the_templates_need(helm: str) -> None:
    """matchConditions (beta, on, in 1.28) and native sidecars (beta, on, in 1.29): the chart installs from 1.29."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == ">=1.29.0-0"
    old = subprocess.run([helm, "template", "t", str(CHART), "--kube-version", "1.28.9"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert old.returncode != 0 and "incompatible with Kubernetes v1.28.9" in old.stderr
    assert containers(deployment(render(helm, "--kube-version", "1.29.0"), "webhook"))


def _b64(text: str) -> bytes:
    import base64

    return base64.b64decode(text)


def test_every_component_logs_in_the_chart_wide_format(helm: str) -> None:
    everything = ["--set", "secondScheduler.enabled=true", "--set", "probe.enabled=true", "--set", "agent.enabled=true"]
    for value, operator in (("json", "json"), ("text", "text")):
        documents = render(helm, *everything, "--set", f"logFormat={value}")
        seen = {}
        for document in documents:
            for container in containers(document):
                if container["image"].startswith("ghcr.io/netaware/") and container["args"][0] != "cleanup":
                    seen[container["args"][0]] = [a for a in container["args"] if a.startswith("--log-format")]
        assert sorted(seen) == ["agent", "extender", "probe", "run", "webhook"]
        assert all(flags == [f"--log-format={operator if name == 'run' else value}"] for name, flags in seen.items()), (
            seen
        )
    own = render(helm, "--set", "logFormat=text", "--set", "operator.logFormat=json")
    assert "--log-format=json" in pod_spec(own, "operator")["containers"][0]["args"]


def test_the_probe_agent_and_extender_are_limited_to_their_own_objects_where_the_api_server_can(helm: str) -> None:
    both = ("--set", "probe.enabled=true", "--set", "agent.enabled=true", "--set", "probe.topologyNamespace=net")
    served = ("--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")
    policies = by_kind(render(helm, *both, *served), "ValidatingAdmissionPolicy")
    bindings = by_kind(render(helm, *both, *served), "ValidatingAdmissionPolicyBinding")
    assert sorted(policies) == sorted(bindings) == [
        "t-netaware-agent-own-node", "t-netaware-extender-nominations", "t-netaware-probe-rows"]  # fmt: skip
    probe, agent = policies["t-netaware-probe-rows"]["spec"], policies["t-netaware-agent-own-node"]["spec"]
    extender = policies["t-netaware-extender-nominations"]["spec"]  # its pods/status patch: the nomination only
    assert extender["matchConditions"][0]["expression"].endswith(
        f'"system:serviceaccount:{NAMESPACE}:t-netaware-extender"')  # fmt: skip
    assert extender["matchConstraints"]["resourceRules"][0]["resources"] == ["pods/status"]
    # each applies to its own ServiceAccount only, and reads the node its pod-bound token names
    assert probe["matchConditions"][0]["expression"].endswith(f'"system:serviceaccount:{NAMESPACE}:t-netaware-probe"')
    assert agent["matchConditions"][0]["expression"].endswith(f'"system:serviceaccount:{NAMESPACE}:t-netaware-agent"')
    assert all(
        "authentication.kubernetes.io/node-name" in spec["variables"][0]["expression"] for spec in (probe, agent)
    )
    assert bindings["t-netaware-probe-rows"]["spec"]["matchResources"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "net"}}  # fmt: skip
    assert all(b["spec"]["validationActions"] == ["Deny"] for b in bindings.values())
    # no nominations (extender.nominateFromNodes 0): neither the extender's policy nor its right to patch pods/status
    quiet = render(helm, *both, *served, "--set", "extender.nominateFromNodes=0")
    assert sorted(by_kind(quiet, "ValidatingAdmissionPolicy")) == ["t-netaware-agent-own-node", "t-netaware-probe-rows"]
    extender_role = by_kind(quiet, "ClusterRole")["t-netaware-extender"]
    assert not any("pods/status" in rule["resources"] for rule in extender_role["rules"])
    with_role = by_kind(render(helm, *both, *served), "ClusterRole")["t-netaware-extender"]
    assert {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]} in with_role["rules"]
    # an API server without the v1 API (1.29), or the switch off: none, and nothing else changes
    assert not by_kind(render(helm, *both), "ValidatingAdmissionPolicy")
    off = render(helm, *both, *served, "--set", "leastPrivilege.admissionPolicies=false")
    assert not by_kind(off, "ValidatingAdmissionPolicy") and not by_kind(off, "ValidatingAdmissionPolicyBinding")


def test_images_by_digest_daemonsets_on_linux_and_the_agents_port_on_its_nodes_address(helm: str) -> None:
    digest = "sha256:" + "ab" * 32
    documents = render(
        helm, "--set", "probe.enabled=true", "--set", "agent.enabled=true", "--set", f"image.digest={digest}"
    )
    images = {c["image"] for d in documents for c in containers(d) if "netaware" in c["image"]}
    assert images == {f"ghcr.io/netaware/netaware@{digest}"}  # every netaware container, the tag ignored
    daemonsets = by_kind(documents, "DaemonSet")
    for name in ("t-netaware-probe", "t-netaware-agent"):
        assert daemonsets[name]["spec"]["template"]["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    agent = daemonsets["t-netaware-agent"]["spec"]["template"]["spec"]
    assert "--listen-address=$(HOST_IP)" in agent["containers"][0]["args"]  # not 0.0.0.0 of the host
    assert {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}} in agent["containers"][0][
        "env"
    ]
    assert agent["hostNetwork"] is True
    every = render(helm, "--set", "agent.enabled=true", "--set", "agent.metricsBindAddress=all")
    assert not [a for a in containers(by_kind(every, "DaemonSet")["t-netaware-agent"])[0]["args"] if "listen" in a]
    files = render(helm, "--set", "agent.enabled=true", "--set", "agent.backend=terway-qos")
    spec = by_kind(files, "DaemonSet")["t-netaware-agent"]["spec"]["template"]["spec"]
    assert "hostNetwork" not in spec and "dnsPolicy" not in spec  # files only: the pod network will do
