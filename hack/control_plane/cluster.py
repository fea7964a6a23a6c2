#!/usr/bin/env python3
"""A real Kubernetes control plane on loopback, from the binaries hack/control-plane/build.sh puts in .tools/bin.

etcd, kube-apiserver (RBAC, the admission chain with MutatingAdmissionWebhook, service-account tokens),
kube-controller-manager (ReplicaSets, the default ServiceAccount, garbage collection, PDB status),
kube-scheduler and KWOK (fake nodes and pods that behave like real ones: nodes become Ready, pods bound
to a KWOK node become Running). Everything listens on 127.0.0.1; state lives in one folder.

    python -m hack.control_plane.cluster up [--dir DIR] [--nodes FILE.yaml ...]   # prints the kubeconfig path
    python -m hack.control_plane.cluster down [--dir DIR]      (from the repository's root)

``hack/control-plane/up.sh`` and ``down.sh`` call it; the e2e tests import :class:`ControlPlane`.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import ipaddress
import json
import os
import pathlib
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hack.control_plane import realnode
from hack.control_plane.ports import free_port
from hack.control_plane.rest import Rest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = ROOT / ".tools" / "bin"
DEFAULT_DIR = ROOT / ".tools" / "cluster"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
# Every scheduler's API client limits (kube-scheduler's own are 50 and 100): one binding per pod, so at 50 requests a
# second the default scheduler's pace in a burst was its client's, not its own
SCHEDULER_QPS, SCHEDULER_BURST = 200, 400
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubectl", "helm")


def missing_binaries(bin_dir: pathlib.Path = BIN) -> list[str]:
    return [name for name in BINARIES if not (bin_dir / name).is_file()]


# --- certificates ------------------------------------------------------------------------------------------------


@dataclass
class Certificates:
    """A CA, the API server's serving pair, an admin client pair and the service-account signing key."""

    folder: pathlib.Path

    def path(self, name: str) -> pathlib.Path:
        return self.folder / name

    def create(self, addresses: Sequence[str] = (), clients: dict[str, tuple[str, str | None]] | None = None) -> None:
        """``addresses``: more IP addresses the API server answers on; ``clients``: more client pairs, file name ->
        (user, group)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        self.folder.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
        later = now + datetime.timedelta(days=30)

        def name(common: str, organization: str | None = None) -> x509.Name:
            parts = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
            if organization:
                parts.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
            return x509.Name(parts)

        def write_key(key: Any, file: str) -> None:
            pem = key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
            self.path(file).write_bytes(pem)
            self.path(file).chmod(0o600)

        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = (
            x509.CertificateBuilder()
            .subject_name(name("netaware-e2e-ca"))
            .issuer_name(name("netaware-e2e-ca"))
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(later)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        self.path("ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        write_key(ca_key, "ca.key")

        def leaf(file: str, subject: x509.Name, usage: Any, sans: Sequence[x509.GeneralName] = ()) -> None:
            key = ec.generate_private_key(ec.SECP256R1())
            builder = (
                x509.CertificateBuilder()
                .subject_name(subject)
                .issuer_name(ca.subject)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now)
                .not_valid_after(later)
                .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            )
            if sans:
                builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
            certificate = builder.sign(ca_key, hashes.SHA256())
            self.path(f"{file}.crt").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
            write_key(key, f"{file}.key")

        sans = [
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
            *(x509.IPAddress(ipaddress.ip_address(address)) for address in addresses),
            x509.DNSName("localhost"),
            x509.DNSName("kubernetes"),
            x509.DNSName("kubernetes.default"),
            x509.DNSName("kubernetes.default.svc"),
        ]
        leaf("apiserver", name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, sans)
        leaf("admin", name("netaware-e2e-admin", "system:masters"), ExtendedKeyUsageOID.CLIENT_AUTH)
        for file, (user, group) in (clients or {}).items():
            leaf(file, name(user, group), ExtendedKeyUsageOID.CLIENT_AUTH)
        service_accounts = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        write_key(service_accounts, "sa.key")
        self.path("sa.pub").write_bytes(
            service_accounts.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def kubeconfig(self, server: str, user: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "e2e", "cluster": {"server": server, "certificate-authority": str(self.path("ca.crt"))}}
            ],
            "users": [{"name": "user", "user": user}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "user"}}],
            "current-context": "e2e",
        }


# --- the control plane -------------------------------------------------------------------------------------------

STOP_GRACE_SECONDS = 3.0  # after SIGTERM, then SIGKILL (the state is thrown away with the folder)


def exited(pid: int) -> bool:
    """Whether ``pid`` has ended: reaped here when it is our child; a zombie of another parent (a process started
    by another ``cluster up``) counts as ended (waiting for its parent to reap it waited the whole grace)."""
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
        return finished != 0
    except ChildProcessError:
        try:
            state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        return state in ("Z", "X")


def wait_exited(pid: int, deadline: float) -> bool:
    """Until ``pid`` has ended (:func:`exited`, asked until it says so: once reaped, its number may be another's)
    or ``deadline`` (monotonic) has passed; whether it ended."""
    while not exited(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def stop_process(pid: int, deadline: float) -> None:
    """``pid`` (sent SIGTERM before) waited for until ``deadline`` (monotonic), then SIGKILLed and reaped:
    kube-apiserver drains its watches a minute on SIGTERM, which nothing here needs. One in uninterruptible sleep is
    left behind after 5 s more, not waited for."""
    if not wait_exited(pid, deadline):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        wait_exited(pid, time.monotonic() + 5)


def loopback_metrics(port: int, context: ssl.SSLContext | None = None) -> str:
    """``/metrics`` of a component serving TLS on loopback ``port``, its certificate not verified (a scheduler serves
    one it signed itself at its start, which no CA of the plane vouches for); ``context``: one that presents a
    client certificate."""
    context = context or ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=context, timeout=30) as answer:
        return str(answer.read().decode())


@dataclass
class ControlPlane:
    """The control plane, with KWOK for fake nodes; with ``real_nodes`` > 0, that many real nodes as well
    (realnode.py), the control plane then running in node 1's network namespace beside CoreDNS."""

    folder: pathlib.Path
    bin_dir: pathlib.Path = BIN
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    real_nodes: int = 0
    host_sysctls: dict[str, str] = field(default_factory=dict)
    warmups: list[tuple[str, str]] = field(default_factory=list)  # a restarted API server: (started, ready) times
    # KWOK renews each fake node's Lease every quarter of this, a kubelet's pace at 40 s: 5,000 fake nodes would
    # write 500 Leases a second on the two cores the tests share. Longer for benchmarks of many nodes (the node
    # lifecycle controller then waits as long before it calls a node lost).
    node_lease_seconds: int = 40
    profiling: bool = False  # the API server's /debug/pprof, for a benchmark that profiles it
    rest: Rest | None = field(default=None, init=False, repr=False, compare=False)  # kubectl's reads, in process

    @property
    def nodes(self) -> list[realnode.RealNode]:
        return [realnode.RealNode(index) for index in range(1, self.real_nodes + 1)]

    @property
    def netns(self) -> str | None:
        return self.nodes[0].netns if self.real_nodes else None

    @property
    def address(self) -> str:
        """Where the nodes and the pods reach the API server (the kubernetes Service's endpoint)."""
        return self.nodes[0].address if self.real_nodes else "127.0.0.1"

    @property
    def certs(self) -> Certificates:
        return Certificates(self.folder / "pki")

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def kubeconfig(self) -> pathlib.Path:
        return self.folder / "admin.kubeconfig"

    @property
    def state_file(self) -> pathlib.Path:
        return self.folder / "state.json"

    # -- lifecycle --

    def start(self, node_files: Iterable[pathlib.Path] = ()) -> None:
        missing = missing_binaries(self.bin_dir)
        if missing:
            raise RuntimeError(f"not built: {', '.join(missing)}; run: bash hack/control-plane/build.sh")
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "logs").mkdir(exist_ok=True)
        self.ports = {name: free_port() for name in ("etcd", "etcd-peer", "apiserver")}
        clients: dict[str, tuple[str, str | None]] = {
            "kubelet-client": ("kube-apiserver-kubelet-client", "system:masters")
        }
        if self.real_nodes:
            clients["kube-proxy"] = ("system:kube-proxy", None)
            clients.update({node.name: (f"system:node:{node.name}", "system:nodes") for node in self.nodes})
        self.certs.create(addresses=[self.address] if self.real_nodes else [], clients=clients)
        self._write_kubeconfigs()
        try:
            if self.real_nodes:
                self._start_network()
            self._start_etcd()
            self._start_apiserver()
            self._start("kube-controller-manager", self._controller_manager_args())
            self._start("kube-scheduler", self._scheduler_args())
            self._start(
                "kwok",
                [
                    f"--kubeconfig={self.kubeconfig}",
                    f"--config={self.bin_dir.parent / 'kwok-stages.yaml'}",
                    f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
                    f"--node-lease-duration-seconds={self.node_lease_seconds}",
                    "--cidr=10.240.0.0/16",
                ],
            )
            self._save()
            self._wait_for_default_service_account()
            for file in node_files:
                self.add_nodes(file)
            if self.real_nodes:
                self._start_real_nodes()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for node in self.nodes:  # kubelet, kube-proxy, containerd and the pods first, while the API server runs
            node.remove()
        for name in reversed(list(self.pids)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pids[name], signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for name, pid in list(self.pids.items()):
            stop_process(pid, deadline)
            self.pids.pop(name, None)
        if self.real_nodes:
            realnode.remove_network(self.real_nodes)
            realnode.write_host_sysctls(self.host_sysctls)
        if os.path.ismount(self.etcd_dir):
            subprocess.run(["umount", "-l", str(self.etcd_dir)], capture_output=True, check=False)
        self.state_file.unlink(missing_ok=True)

    @classmethod
    def load(cls, folder: pathlib.Path) -> ControlPlane:
        state = json.loads((folder / "state.json").read_text())
        return cls(
            folder,
            pathlib.Path(state["bin"]),
            state["ports"],
            state["pids"],
            state.get("real_nodes", 0),
            state.get("host_sysctls", {}),
            [tuple(window) for window in state.get("warmups", [])],
            state.get("node_lease_seconds", 40),
            state.get("profiling", False),
        )

    def _save(self) -> None:
        state = {
            "bin": str(self.bin_dir),
            "ports": self.ports,
            "pids": self.pids,
            "real_nodes": self.real_nodes,
            "host_sysctls": self.host_sysctls,
            "warmups": self.warmups,
            "node_lease_seconds": self.node_lease_seconds,
            "profiling": self.profiling,
        }
        self.state_file.write_text(json.dumps(state))

    def _start(
        self,
        name: str,
        args: Sequence[str],
        binary: str | None = None,
        netns: str | None = None,
        env: dict[str, str] | None = None,
        host: bool = False,
    ) -> int:
        """Start a component with its log; in the control plane's network namespace (``netns``: another one;
        ``host``: the host's)."""
        log = (self.folder / "logs" / f"{name}.log").open("ab")
        command = [binary if binary and binary.startswith("/") else str(self.bin_dir / (binary or name)), *args]
        netns = None if host else (netns or self.netns)
        process = subprocess.Popen(
            realnode.in_netns(netns, *command) if netns else command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **env} if env else None,
            start_new_session=True,  # a Ctrl-C in the terminal reaches only the script, which stops them in order
        )
        self.pids[name] = process.pid
        return process.pid

    def _write_kubeconfigs(self) -> None:
        admin = {
            "client-certificate": str(self.certs.path("admin.crt")),
            "client-key": str(self.certs.path("admin.key")),
        }
        self.kubeconfig.write_text(json.dumps(self.certs.kubeconfig(self.server, admin)))

    def token_kubeconfig(self, name: str, token: str) -> pathlib.Path:
        """A kubeconfig that authenticates with ``token`` (a ServiceAccount's, from ``kubectl create token``)."""
        path = self.folder / f"{name}.kubeconfig"
        path.write_text(json.dumps(self.certs.kubeconfig(self.server, {"token": token})))
        return path

    # -- real nodes --

    @property
    def api_socket(self) -> pathlib.Path:
        return self.folder / "apiserver.sock"

    def _start_network(self) -> None:
        """The nodes' namespaces and links, and the API server's port on the host's loopback: a forwarder pair
        through a Unix socket (the one thing both namespaces see), so that one kubeconfig serves both sides."""
        self.host_sysctls = realnode.read_host_sysctls()
        realnode.remove_network(self.real_nodes)  # what a crashed run left
        realnode.create_network(self.nodes)
        self._save()
        port = self.ports["apiserver"]
        self.api_socket.unlink(missing_ok=True)
        self._start("forward-in", [f"UNIX-LISTEN:{self.api_socket},fork", f"TCP:127.0.0.1:{port}"], "/usr/bin/socat")
        self._start(
            "forward-host",
            [f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork", f"UNIX-CONNECT:{self.api_socket}"],
            "/usr/bin/socat",
            host=True,
        )

    def _start_real_nodes(self) -> None:
        corefile = self.folder / "Corefile"
        corefile.write_text(
            f""".:53 {{
    bind {self.address}
    errors
    kubernetes {realnode.CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {self.kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"""
        )
        self._start("coredns", ["-conf", str(corefile)])
        node_server = f"https://{self.address}:{self.ports['apiserver']}"
        proxy = self.folder / "kube-proxy.kubeconfig"
        proxy.write_text(json.dumps(self.certs.kubeconfig(node_server, self._client("kube-proxy"))))
        for node in self.nodes:
            kubelet = self.folder / f"{node.name}.kubeconfig"
            kubelet.write_text(json.dumps(self.certs.kubeconfig(node_server, self._client(node.name))))
            credentials = realnode.NodeCredentials(self.certs.path("ca.crt"), kubelet, proxy, self.address)
            node.start(self.folder / node.name, self.bin_dir, self._start_saved, self._wait, credentials)
        for name in [node.name for node in self.nodes]:
            self._wait(lambda name=name: self._node_ready(name), f"node {name}", 120)

    def _node_ready(self, name: str) -> bool:
        query = '{.status.conditions[?(@.type=="Ready")].status}'
        return self.kubectl("get", "node", name, "-o", f"jsonpath={query}", check=False).stdout == "True"

    def _start_saved(self, name: str, binary: str, args: Sequence[str], netns: str, env: dict[str, str]) -> int:
        pid = self._start(name, args, binary=binary, netns=netns, env=env)
        self._save()
        return pid

    def _client(self, name: str) -> dict[str, str]:
        return {
            "client-certificate": str(self.certs.path(f"{name}.crt")),
            "client-key": str(self.certs.path(f"{name}.key")),
        }

    @property
    def etcd_dir(self) -> pathlib.Path:
        return self.folder / "etcd"

    def _start_etcd(self) -> None:
        client = f"http://127.0.0.1:{self.ports['etcd']}"
        self.etcd_dir.mkdir(exist_ok=True)
        if os.geteuid() == 0 and not os.path.ismount(self.etcd_dir):
            # in memory where it can be (root): 120 to 160 MB written per control plane, which cost the suite's
            # CPU in writeback (unmounted by stop; files a crashed run leaves go with pytest's old folders)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4g,mode=0700", "tmpfs", str(self.etcd_dir)],
                           capture_output=True, check=False)  # fmt: skip
        self._start(
            "etcd",
            [
                f"--data-dir={self.etcd_dir}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls=http://127.0.0.1:{self.ports['etcd-peer']}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{self.ports['etcd-peer']}",
                f"--initial-cluster=default=http://127.0.0.1:{self.ports['etcd-peer']}",
                "--unsafe-no-fsync",  # a test cluster: durability is not the point, speed is
                "--quota-backend-bytes=4294967296",
            ],
        )
        if not self.netns:  # else not reachable from here: the API server's readiness covers it
            self._wait(lambda: _http_ok(f"{client}/health"), "etcd", 30)

    @property
    def audit_log(self) -> pathlib.Path:
        """One JSON object per request (who, verb, resource, answer): RBAC tests read it."""
        return self.folder / "logs" / "audit.log"

    def audit_events(self, user: str, since: datetime.datetime | None = None) -> list[dict[str, Any]]:
        """Every completed request of ``user`` (``system:serviceaccount:NS:NAME``) so far, or received ``since`` (other
        tests' processes may use the same ServiceAccount), but those a restarted kube-apiserver answered before it was
        ready (:meth:`crash_apiserver`): until its RBAC caches have synced it refuses every request with 403, which
        says nothing of the permissions a component has."""
        if not self.audit_log.exists():
            return []
        warming = [(datetime.datetime.fromisoformat(start), datetime.datetime.fromisoformat(ready))
                   for start, ready in self.warmups]  # fmt: skip
        events = []
        for line in self.audit_log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("user", {}).get("username") != user or event.get("stage") != "ResponseComplete":
                continue
            received = datetime.datetime.fromisoformat(
                str(event.get("requestReceivedTimestamp")).replace("Z", "+00:00")
            )
            if (since is None or received >= since) and not any(start <= received <= ready for start, ready in warming):
                events.append(event)
        return events

    def _start_apiserver(self) -> None:
        certs = self.certs
        policy = self.folder / "audit-policy.yaml"
        policy.write_text(
            json.dumps(
                {
                    "apiVersion": "audit.k8s.io/v1",
                    "kind": "Policy",
                    "omitStages": ["RequestReceived", "ResponseStarted"],
                    "rules": [
                        {"level": "None", "users": ["system:apiserver", "system:kube-scheduler"]},
                        {"level": "None", "userGroups": ["system:masters", "system:nodes"]},
                        {"level": "Metadata"},
                    ],
                }
            )
        )
        self._start(
            "kube-apiserver",
            [
                f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
                f"--bind-address={'0.0.0.0' if self.real_nodes else '127.0.0.1'}",
                f"--advertise-address={self.address}",
                f"--secure-port={self.ports['apiserver']}",
                f"--kubelet-client-certificate={certs.path('kubelet-client.crt')}",
                f"--kubelet-client-key={certs.path('kubelet-client.key')}",
                "--kubelet-preferred-address-types=InternalIP,Hostname",  # nodes have no DNS names here
                f"--tls-cert-file={certs.path('apiserver.crt')}",
                f"--tls-private-key-file={certs.path('apiserver.key')}",
                f"--client-ca-file={certs.path('ca.crt')}",
                f"--service-account-key-file={certs.path('sa.pub')}",
                f"--service-account-signing-key-file={certs.path('sa.key')}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NamespaceLifecycle,ServiceAccount,DefaultTolerationSeconds,"
                "MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ResourceQuota,PodSecurity",
                "--enable-priority-and-fairness=false",
                "--event-ttl=30m",
                f"--profiling={str(self.profiling).lower()}",
                # a loopback advertise address cannot back the kubernetes Service; a real node's address does
                f"--endpoint-reconciler-type={'lease' if self.real_nodes else 'none'}",
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-maxsize=0",
                # a watcher too slow to take its events holds every other watcher's back, then is closed: logged
                # (with its selectors), so that a run can tell whose watch lagged
                "--vmodule=cache_watcher=1",
            ],
        )
        self._wait(self._apiserver_ready, "kube-apiserver", 90)

    def _controller_manager_args(self) -> list[str]:
        return [
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            f"--service-account-private-key-file={self.certs.path('sa.key')}",
            f"--root-ca-file={self.certs.path('ca.crt')}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            "--use-service-account-credentials=false",
            "--controllers=*,-nodeipam",
            "--concurrent-replicaset-syncs=10",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            *([f"--node-monitor-grace-period={self.node_lease_seconds}s"] if self.node_lease_seconds > 40 else []),
        ]

    def _scheduler_args(self, config: pathlib.Path | None = None, name: str = "kube-scheduler") -> list[str]:
        self.ports[name] = free_port()  # its metrics: :meth:`scheduler_metrics`
        serving = [
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports[name]}",
        ]
        if config is not None:  # the file carries the kubeconfig and the leader election settings
            return [f"--config={config}", *serving]
        return [f"--kubeconfig={self.kubeconfig}", "--leader-elect=false", f"--kube-api-qps={SCHEDULER_QPS}",
                f"--kube-api-burst={SCHEDULER_BURST}", *serving]  # fmt: skip

    def scheduler_config(self, profiles: list[dict[str, Any]], extenders: list[dict[str, Any]]) -> dict[str, Any]:
        """A KubeSchedulerConfiguration for :meth:`start_scheduler` that talks to this cluster."""
        return {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(self.kubeconfig), "qps": SCHEDULER_QPS, "burst": SCHEDULER_BURST},
            "leaderElection": {"leaderElect": False},
            "profiles": profiles,
            "extenders": extenders,
        }

    def start_scheduler(self, name: str, config: pathlib.Path, binary: str = "kube-scheduler") -> None:
        """Another scheduler (a profile that calls the extender; ``binary`` scheduler-plugins: the upstream peer),
        stopped with the cluster."""
        self._start(name, self._scheduler_args(config, name), binary=binary)
        self._save()

    def scheduler_metrics(self, name: str = "kube-scheduler") -> str:
        """The metrics of scheduler ``name``, read with the admin's certificate."""
        return loopback_metrics(self.ports[name], self.admin_context())

    def crash_apiserver(self, down_seconds: float = 0.0) -> None:
        """SIGKILL kube-apiserver (no graceful shutdown: every connection reset, every watch broken), leave it down
        ``down_seconds`` (connections refused), start it again with the same flags and wait until it is ready; etcd
        keeps the state, the other components reconnect on their own."""
        pid = self.pids["kube-apiserver"]
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        time.sleep(down_seconds)
        order = list(self.pids)
        started = datetime.datetime.now(datetime.UTC)
        self._start_apiserver()
        ready = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=2)  # the audit log's clock skew
        self.warmups.append((started.isoformat(), ready.isoformat()))
        self.pids = {name: self.pids[name] for name in order}  # stopped in the same order as before
        self._save()

    def stop_component(self, name: str) -> None:
        pid = self.pids.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        stop_process(pid, time.monotonic() + STOP_GRACE_SECONDS)
        self._save()

    def admin_context(self) -> ssl.SSLContext:
        """A TLS context that trusts this plane's CA and presents its admin's certificate (raises OSError while they
        are not written yet)."""
        context = ssl.create_default_context(cafile=str(self.certs.path("ca.crt")))
        context.load_cert_chain(str(self.certs.path("admin.crt")), str(self.certs.path("admin.key")))
        return context

    def _in_process(self, args: tuple[str, ...]) -> subprocess.CompletedProcess[str] | None:
        if "apiserver" not in self.ports:
            return None
        if self.rest is None or self.rest.server != self.server:
            try:
                self.rest = Rest(self.server, self.admin_context())
            except OSError:  # no certificates yet: kubectl says so
                return None
        return self.rest.answer(args)

    def _apiserver_ready(self) -> bool:
        return _http_ok(f"{self.server}/readyz", self.admin_context())

    def _wait_for_default_service_account(self) -> None:
        def ready() -> bool:
            done = self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False)
            return done.returncode == 0

        self._wait(ready, "the default ServiceAccount (kube-controller-manager)", 60)

    def _wait(self, check: Any, what: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if check():
                return
            for name, pid in self.pids.items():
                try:
                    finished, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    continue
                if finished:
                    log = (self.folder / "logs" / f"{name}.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"{name} exited ({status}) while waiting for {what}:\n{log}")
            time.sleep(0.2)
        raise RuntimeError(f"{what} not ready within {seconds:g} s (logs in {self.folder / 'logs'})")

    # -- using it --

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """kubectl ``args`` against this plane; the simplest reads answered in process, as kubectl would (rest.py)."""
        done = self._in_process(args) if stdin is None else None
        if done is not None:
            return done
        done = subprocess.run(
            [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            input=stdin,
            check=False,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
        return done

    def add_nodes(self, file: pathlib.Path) -> list[str]:
        """Create KWOK nodes from the Node objects of a YAML file (labels, annotations, allocatable kept)."""
        nodes = kwok_nodes(file.read_text())
        if nodes:
            self.kubectl("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
        return [node["metadata"]["name"] for node in nodes]


def kwok_nodes(text: str) -> list[dict[str, Any]]:
    """The Node objects of a YAML text as KWOK nodes: the KWOK annotation, the taints, the status' capacity and
    allocatable kept (the API server keeps a Node's status on create, as a kubelet's registration does)."""
    import yaml

    nodes = []
    for document in yaml.safe_load_all(text):
        if not isinstance(document, dict) or document.get("kind") != "Node":
            continue
        metadata = dict(document.get("metadata") or {})
        metadata["annotations"] = {**(metadata.get("annotations") or {}), KWOK_ANNOTATION: "fake"}
        metadata["labels"] = {
            **(metadata.get("labels") or {}),
            "kubernetes.io/hostname": metadata["name"],
            "type": "kwok",
        }
        status = document.get("status") or {}
        allocatable = status.get("allocatable") or {"cpu": "32", "memory": "256Gi", "pods": "110"}
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {key: metadata[key] for key in ("name", "labels", "annotations")},
                "spec": {"taints": (document.get("spec") or {}).get("taints") or []},
                "status": {"allocatable": allocatable, "capacity": status.get("capacity") or allocatable},
            }
        )
    return nodes


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("up", "down"))
    parser.add_argument("--dir", type=pathlib.Path, default=DEFAULT_DIR, help=f"state folder (default {DEFAULT_DIR})")
    parser.add_argument("--nodes", type=pathlib.Path, action="append", default=[], help="YAML with Node objects")
    parser.add_argument(
        "--real-nodes", type=int, default=0, help="real nodes (kubelet, containerd) beside the KWOK nodes (0-9)"
    )
    args = parser.parse_args(argv)
    if not 0 <= args.real_nodes <= 9:
        parser.error(f"--real-nodes: {args.real_nodes} is not within 0-9")
    if args.command == "down":
        if not (args.dir / "state.json").exists():
            print(f"no cluster in {args.dir}", file=sys.stderr)
            return 0
        ControlPlane.load(args.dir).stop()
        print(f"stopped the cluster in {args.dir}")
        return 0
    if (args.dir / "state.json").exists():
        print(f"a cluster already runs in {args.dir} (down first)", file=sys.stderr)
        return 1
    plane = ControlPlane(args.dir, real_nodes=args.real_nodes)
    started = time.monotonic()
    try:
        plane.start(args.nodes)
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"control plane up in {time.monotonic() - started:.1f} s: {plane.server}")
    print(f"export KUBECONFIG={plane.kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
