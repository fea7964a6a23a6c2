"""Real nodes for the control plane of cluster.py: containerd (runc, the CNI plugins), kubelet and kube-proxy.

Each node is a network namespace ``naw-node-I`` with one NIC, ``eth0`` (10.201.0.I/24), on a bridge in the
namespace ``naw-fabric``; its pods get 10.244.I.0/24 from the CNI ``bridge`` plugin (``cni0``) with ``portmap``
and ``bandwidth``, and every node routes the other nodes' pod ranges through their addresses. The control plane
runs in node 1's namespace (a control-plane node, as kubeadm makes one), so the API server reaches Services
through node 1's kube-proxy. Nothing gets an address outside these namespaces: the host reaches the API server
through a forwarder on 127.0.0.1 (cluster.py).

Everything a node makes is named after it, so :func:`remove` finds it again from the name alone (a crashed run, or
``cluster.py down``): its processes (by cgroup and by the containerd socket in their command line), its mounts under
``/var/lib/netaware-real-node-I`` (itself a tmpfs) and ``/run/netaware-real-node-I``, its cgroups
(``/netaware-real-node-I`` in every hierarchy), and the namespaces, whose deletion takes the veths, bridges, qdiscs
and iptables rules with them.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hack.control_plane.shell import sh

FABRIC = "naw-fabric"
ROOT_TMPFS_SIZE = "8g"  # a node's root folder, a tmpfs: its images and pods take about 1.2 GB (kubelet evicts at 99 %)
NODE_NETWORK = "10.201.0"  # node I: 10.201.0.I/24
CLUSTER_CIDR = "10.244.0.0/16"  # node I's pods: 10.244.I.0/24
CLUSTER_DOMAIN = "cluster.local"
CGROUP_ROOT = pathlib.Path("/sys/fs/cgroup")
# Host-wide settings kubelet and kube-proxy write (kubelet's kernel tunables, kube-proxy's conntrack table):
# saved before the first node starts and written back after the last one stops.
HOST_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/netfilter/nf_conntrack_max",
)

# (name, binary, args, netns, env) -> pid: how cluster.py starts a process with its log
Starter = Callable[[str, str, Sequence[str], str, dict[str, str]], int]
# (check, what, seconds): cluster.py's wait, which also reports a started process that exited, with its log
Waiter = Callable[[Callable[[], bool], str, float], None]


def netns_path(netns: str) -> str:
    return f"/run/netns/{netns}"


def in_netns(netns: str, *command: str) -> list[str]:
    """``command`` in the network namespace ``netns`` only (``ip netns exec`` would also give it a mount namespace
    of its own, where kubelet's and containerd's mounts would not meet)."""
    return ["nsenter", f"--net={netns_path(netns)}", "--", *command]


def run(*command: str) -> str:
    """The command's standard output; a failure raises ``RuntimeError`` with its standard error."""
    return sh(*command).stdout


@dataclass(frozen=True)
class RealNode:
    index: int

    @property
    def name(self) -> str:
        return f"real-node-{self.index}"

    @property
    def netns(self) -> str:
        return f"naw-node-{self.index}"

    @property
    def address(self) -> str:
        return f"{NODE_NETWORK}.{self.index}"

    @property
    def pod_cidr(self) -> str:
        return f"10.244.{self.index}.0/24"

    @property
    def state_dir(self) -> pathlib.Path:
        return pathlib.Path(f"/run/netaware-{self.name}")

    @property
    def root_dir(self) -> pathlib.Path:
        return pathlib.Path(f"/var/lib/netaware-{self.name}")

    @property
    def cgroup(self) -> str:
        return f"netaware-{self.name}"

    @property
    def containerd_socket(self) -> pathlib.Path:
        return self.state_dir / "containerd.sock"

    # -- configuration files --

    def cni_config(self) -> dict[str, object]:
        return {
            "cniVersion": "1.0.0",
            "name": "netaware",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": False,  # pods reach other nodes' pods by their own addresses (routes, no NAT)
                    "hairpinMode": True,  # a pod reaching itself through a Service
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": self.pod_cidr}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(self.root_dir / "cni"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
                {"type": "bandwidth", "capabilities": {"bandwidth": True}},
            ],
        }

    def containerd_config(self, bin_dir: pathlib.Path, cni_dir: pathlib.Path) -> str:
        return f"""version = 4
root = '{self.root_dir / "containerd"}'
state = '{self.state_dir / "containerd"}'
imports = []
[plugins.'io.containerd.server.v1.grpc']
  address = '{self.containerd_socket}'
[plugins.'io.containerd.server.v1.ttrpc']
  address = '{self.containerd_socket}.ttrpc'
[plugins.'io.containerd.internal.v1.opt']
  path = '{self.root_dir / "opt"}'
[plugins.'io.containerd.nri.v1.nri']
  disable = true
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = 'localhost/pause:netaware'
[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  # No process here may lower its OOM score (this machine's root lacks CAP_SYS_RESOURCE): kubelet's -998 for the
  # sandboxes and -997 for Guaranteed pods become containerd's own score instead of failing every sandbox.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = 'io.containerd.runc.v2'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = '/usr/sbin/runc'
      Root = '{self.state_dir / "runc"}'
      SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['{bin_dir / "cni"}']
    conf_dir = '{cni_dir}'
"""

    def kubelet_config(self, client_ca: pathlib.Path, dns: str) -> dict[str, object]:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,  # this machine mounts cgroup v1; kubelet 1.37 still runs on it when told
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": f"/{self.cgroup}",
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "address": self.address,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(client_ca)},
            },
            "authorization": {"mode": "Webhook"},
            "clusterDNS": [dns],
            "clusterDomain": CLUSTER_DOMAIN,
            "resolvConf": "",  # the host's resolver is not reachable from the node's namespace
            "failSwapOn": False,
            "serializeImagePulls": False,
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "nodeStatusUpdateFrequency": "4s",
            "syncFrequency": "10s",
            "maxPods": 50,
        }

    def kube_proxy_config(self, kubeconfig: pathlib.Path) -> dict[str, object]:
        return {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "mode": "iptables",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "hostnameOverride": self.name,
            "clusterCIDR": CLUSTER_CIDR,
            "metricsBindAddress": "127.0.0.1:10249",
            "healthzBindAddress": "127.0.0.1:10256",
            # the conntrack table is the host's: leave its size and timeouts as they are
            "conntrack": {"maxPerCore": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        }

    # -- lifecycle --

    def create_folders(self) -> None:
        for folder in (self.state_dir, self.root_dir):
            folder.mkdir(parents=True, exist_ok=True)
        if not os.path.ismount(self.root_dir):
            # In memory: a node imports and unpacks the chart's images, about 1 GB written per node (six nodes a
            # suite); the kernel's workers (writeback and ext4's extents among them) took a fifth of the suite's
            # CPU, and on a tmpfs the real node module took 101 s of CPU, not 135. Only what is written takes
            # memory; :meth:`remove` unmounts it with the rest.
            run("mount", "-t", "tmpfs", "-o", f"size={ROOT_TMPFS_SIZE},mode=0755", "tmpfs", str(self.root_dir))
        for hierarchy in cgroup_hierarchies():
            path = hierarchy / self.cgroup
            path.mkdir(exist_ok=True)
            if (hierarchy / "cpuset.cpus").exists():  # a new cpuset is empty until it is given cpus and memory nodes
                for file in ("cpuset.cpus", "cpuset.mems"):
                    (path / file).write_text((hierarchy / file).read_text())

    def start(
        self, folder: pathlib.Path, bin_dir: pathlib.Path, start: Starter, wait: Waiter, certs: NodeCredentials
    ) -> None:
        """Start containerd (with the images of .tools/node/images), kubelet and kube-proxy; returns when the
        runtime answers. The caller waits for the Node to be Ready."""
        folder.mkdir(parents=True, exist_ok=True)
        self.create_folders()
        cni_dir = folder / "cni"
        cni_dir.mkdir(exist_ok=True)
        (cni_dir / "10-netaware.conflist").write_text(json.dumps(self.cni_config(), indent=2))
        (folder / "containerd.toml").write_text(self.containerd_config(bin_dir, cni_dir))
        path = f"{bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        env = {"PATH": path}
        start(f"{self.name}-containerd", "containerd", ["--config", str(folder / "containerd.toml")], self.netns, env)
        wait(self.containerd_socket.exists, f"containerd of {self.name}", 30)
        self.import_images(bin_dir)
        (folder / "kubelet.yaml").write_text(json.dumps(self.kubelet_config(certs.ca, certs.dns)))
        start(
            f"{self.name}-kubelet",
            "kubelet",
            [
                f"--config={folder / 'kubelet.yaml'}",
                f"--kubeconfig={certs.kubelet}",
                f"--root-dir={self.root_dir / 'kubelet'}",
                f"--cert-dir={folder / 'pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.address}",
                f"--node-labels={','.join(f'{k}={v}' for k, v in self.labels().items())}",
            ],
            self.netns,
            env,
        )
        (folder / "kube-proxy.yaml").write_text(json.dumps(self.kube_proxy_config(certs.kube_proxy)))
        start(f"{self.name}-kube-proxy", "kube-proxy", [f"--config={folder / 'kube-proxy.yaml'}"], self.netns, env)

    def labels(self) -> dict[str, str]:
        """Real nodes are one zone each, in one region (the probe's rows become zone costs)."""
        return {
            "topology.kubernetes.io/region": "real",
            "topology.kubernetes.io/zone": f"real-{self.index}",
            "type": "real",
        }

    def import_images(self, bin_dir: pathlib.Path) -> None:
        images = sorted((bin_dir.parent / "node" / "images").glob("*.tar"))
        if not images:
            raise RuntimeError("no node images in .tools/node/images: run bash hack/control-plane/build.sh")
        for archive in images:
            if archive.name == "base.tar":
                continue
            run(
                str(bin_dir / "ctr"),
                f"--address={self.containerd_socket}",
                "-n",
                "k8s.io",
                "images",
                "import",
                "--local",
                str(archive),
            )

    def lose(self) -> None:
        """The node fails: kubelet, kube-proxy, containerd, the shims and every pod's processes killed at once
        (SIGKILL: nothing stops gracefully, no Lease is handed back, nothing tells the API server), the network
        namespaces and mounts left (:meth:`remove` takes them later). The API server sees the node's heartbeats stop."""
        if left := self.kill():
            raise RuntimeError(f"{self.name}: processes {left} survived SIGKILL")

    def remove(self) -> None:
        """Stop and remove everything of this node that exists (idempotent). Its processes are killed at once
        (SIGKILL), as :meth:`lose` does: the node's state goes with its folders, and a SIGTERM first only waited
        out the pods' drains (a webhook's shutdown delay, up to the 10 s bound per node, three nodes one after
        the other: 10 to 25 s of a module's teardown)."""
        self.kill()
        unmount_under((self.root_dir, self.state_dir))
        for folder in (self.root_dir, self.state_dir):
            subprocess.run(["rm", "-rf", "--one-file-system", str(folder)], check=False)
        for hierarchy in cgroup_hierarchies():
            remove_cgroup(hierarchy / self.cgroup)
        if pathlib.Path(netns_path(self.netns)).exists():
            subprocess.run(["ip", "netns", "delete", self.netns], check=False)

    def kill(self) -> list[int]:
        """SIGKILL every process of this node (:meth:`processes`, looked up again while waiting: a shim can start
        a moment after its containerd's list was read), waiting up to 10 s for them to go; those still alive."""
        deadline = time.monotonic() + 10
        while True:
            left = [pid for pid in self.processes() if _alive(pid)]
            if not left or time.monotonic() >= deadline:
                return left
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)

    def processes(self) -> list[int]:
        """Every process of this node: in its cgroups (the pods), or with its state folder on the command line
        (containerd, its shims, kubelet and kube-proxy, whose configuration names it)."""
        found: set[int] = set()
        for hierarchy in cgroup_hierarchies():
            # os.walk, not rglob: a pod's cgroup removed during the walk (its containers killed) is skipped, where
            # rglob raised FileNotFoundError (the node-lost test failed so once, in lose())
            for folder, _, files in os.walk(hierarchy / self.cgroup):
                if "cgroup.procs" in files:
                    with contextlib.suppress(OSError):
                        found.update(int(line) for line in (pathlib.Path(folder) / "cgroup.procs").read_text().split())
        marks = (f"{self.state_dir}/", f"{self.root_dir}/", f"/{self.name}/")
        for entry in pathlib.Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if any(mark in command for mark in marks):
                    found.add(int(entry.name))
        found.discard(os.getpid())
        return sorted(found)


@dataclass(frozen=True)
class NodeCredentials:
    """What a node needs from the control plane: the cluster CA, kubelet's and kube-proxy's kubeconfigs, and the
    cluster DNS address."""

    ca: pathlib.Path
    kubelet: pathlib.Path
    kube_proxy: pathlib.Path
    dns: str


def cgroup_hierarchies() -> list[pathlib.Path]:
    """The cgroup hierarchies kubelet and runc use: every v1 hierarchy, and the hybrid layout's v2 one (unified),
    where runc makes each container's cgroup too (cgroup v2 alone would be one folder)."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return [CGROUP_ROOT]
    return sorted(path for path in CGROUP_ROOT.iterdir() if path.is_dir() and not path.is_symlink())


def remove_cgroup(path: pathlib.Path) -> None:
    if not path.exists():
        return
    for child in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            child.rmdir()
    with contextlib.suppress(OSError):
        path.rmdir()


def unmount_under(folders: Sequence[pathlib.Path]) -> None:
    """Unmount every mount point under ``folders``, deepest first (kubelet's volumes, containerd's rootfs and the
    pods' network namespace files)."""
    prefixes = tuple(str(folder) + "/" for folder in folders) + tuple(str(folder) for folder in folders)
    points = []
    for line in pathlib.Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")
        if point.startswith(prefixes):
            points.append(point)
    for point in sorted(set(points), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def create_network(nodes: Sequence[RealNode]) -> None:
    """The fabric's bridge, each node's namespace and NIC, and the routes to the other nodes' pods."""
    run("ip", "netns", "add", FABRIC)
    run("ip", "-n", FABRIC, "link", "add", "br0", "type", "bridge")
    run("ip", "-n", FABRIC, "link", "set", "br0", "up")
    for node in nodes:
        run("ip", "netns", "add", node.netns)
        run(
            "ip",
            "link",
            "add",
            "eth0",
            "netns",
            node.netns,
            "type",
            "veth",
            "peer",
            "name",
            f"n{node.index}",
            "netns",
            FABRIC,
        )
        run("ip", "-n", FABRIC, "link", "set", f"n{node.index}", "master", "br0", "up")
        run("ip", "-n", node.netns, "link", "set", "lo", "up")
        run("ip", "-n", node.netns, "addr", "add", f"{node.address}/24", "dev", "eth0")
        run("ip", "-n", node.netns, "link", "set", "eth0", "up")
        run("ip", "-n", node.netns, "route", "add", "default", "dev", "eth0")  # the agent shapes this device
        for other in nodes:
            if other is not node:
                run("ip", "-n", node.netns, "route", "add", other.pod_cidr, "via", other.address)
        for setting in ("net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables"):
            run(*in_netns(node.netns, "sh", "-c", f"echo 1 > /proc/sys/{setting}"))


def remove_network(count: int) -> None:
    for index in range(1, count + 1):
        RealNode(index).remove()
    if pathlib.Path(netns_path(FABRIC)).exists():
        subprocess.run(["ip", "netns", "delete", FABRIC], check=False)
    remove_dead_shim_sockets()


def remove_dead_shim_sockets() -> None:
    """containerd's shims bind their sockets under a fixed /run/containerd/s whatever containerd's state folder;
    a shim killed with its node leaves its file: remove the files no process listens on (and the folders, empty)."""
    folder = pathlib.Path("/run/containerd/s")
    if not folder.is_dir():
        return
    bound = {line.split()[-1] for line in pathlib.Path("/proc/net/unix").read_text().splitlines()[1:]}
    for socket_file in folder.iterdir():
        if str(socket_file) not in bound:
            socket_file.unlink(missing_ok=True)
    for empty in (folder, folder.parent):
        with contextlib.suppress(OSError):
            empty.rmdir()


def read_host_sysctls() -> dict[str, str]:
    values = {}
    for name in HOST_SYSCTLS:
        with contextlib.suppress(OSError):
            values[name] = (pathlib.Path("/proc/sys") / name).read_text().strip()
    return values


def write_host_sysctls(values: dict[str, str]) -> None:
    for name, value in values.items():
        with contextlib.suppress(OSError):
            (pathlib.Path("/proc/sys") / name).write_text(value)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(ChildProcessError):
        finished, _ = os.waitpid(pid, os.WNOHANG)
        return finished == 0
    return True
