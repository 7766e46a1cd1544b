"""Configuration files of one real node: containerd, the CNI network, kubelet, kube-proxy.

Pure functions from a ``NodeLayout`` to text, so the settings that mattered on this machine
(../shared/docs/real-nodes-lab.md) are visible in one place and unit-tested:

- containerd 2 (config version 3): private root/state/sockets, runc with cgroupfs,
  ``restrict_oom_score_adj``
  (the pause container asks for -998, which this machine refuses), the locally built pause
  image, Debian's CNI plugins;
- kubelet: cgroupfs driver under a cgroup root of its own, ``failCgroupV1: false`` (this
  machine has v1 hybrid cgroups), no swap check, client-certificate authentication for
  kube-apiserver's logs/exec calls, image GC and eviction relaxed so images built here stay;
- kubelet, when the cluster asks: the static CPU manager (localkube/realnode/noderes.py);
- kube-proxy: iptables mode inside the node's network namespace, no conntrack sysctls
  (those are not per namespace).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from localkube.realnode.netplan6 import NodeV6
from localkube.realnode.noderes import NodeResources

PAUSE_IMAGE = "registry.local/kubevirt-py/pause:3.10"
CNI_BIN_DIR = "/usr/lib/cni"
RUNC = "/usr/sbin/runc"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeLayout:
    """Where one real node keeps its state on the host, and its addresses."""

    name: str
    dir: Path
    node_ip: str
    pod_cidr: str
    pod_gateway: str
    cluster_cidr: str
    cgroup_root: str
    routes: tuple[tuple[str, str], ...]  # (other node's pod range, via its node IP)
    v6: NodeV6 | None = None  # the node's IPv6 addresses: the cluster is dual-stack

    @property
    def node_ips(self) -> str:
        """kubelet's ``--node-ip``: IPv4, then IPv6 when dual-stack."""
        return self.node_ip if self.v6 is None else f"{self.node_ip},{self.v6.node_ip}"

    @property
    def cluster_cidrs(self) -> str:
        """kube-proxy's ``clusterCIDR``: IPv4, then IPv6 when dual-stack."""
        v6 = self.v6
        return self.cluster_cidr if v6 is None else f"{self.cluster_cidr},{v6.cluster_cidr}"

    @property
    def containerd_dir(self) -> Path:
        return self.dir / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd_dir / "containerd.sock"

    @property
    def registry_config_dir(self) -> Path:
        """containerd's ``config_path``: one ``<host:port>/hosts.toml`` per trusted registry."""
        return self.containerd_dir / "certs.d"

    @property
    def cni_conf_dir(self) -> Path:
        return self.dir / "cni" / "net.d"

    @property
    def kubelet_dir(self) -> Path:
        """Bound over /var/lib/kubelet inside the node's mount namespace."""
        return self.dir / "kubelet"

    @property
    def config_dir(self) -> Path:
        return self.dir / "config"

    @property
    def sysctl_dir(self) -> Path:
        """Files bound over the global /proc/sys entries the kubelet rewrites."""
        return self.dir / "sysctl"


def containerd_toml(node: NodeLayout, *, shim: Path, cni_bin: tuple[Path, ...] = ()) -> str:
    """containerd 2's configuration (format version 3: the CRI plugin split into
    ``cri.v1.images`` and ``cri.v1.runtime``; 2.4 reads it as is); ``shim``: the runc shim
    built with it; ``cni_bin``: more CNI plugin directories (multus). NRI is off: its socket
    would be one host path for every node."""
    bin_dirs = ", ".join(f'"{d}"' for d in (CNI_BIN_DIR, *map(str, cni_bin)))
    d = node.containerd_dir
    images, runtime = (
        'plugins."io.containerd.cri.v1.images"',
        'plugins."io.containerd.cri.v1.runtime"',
    )
    return f"""\
version = 3
root = "{d / "root"}"
state = "{d / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs",
  "io.containerd.snapshotter.v1.blockfile", "io.containerd.nri.v1.nri",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{node.containerd_socket}"
[ttrpc]
  address = "{node.containerd_socket}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{d / "opt"}"
[{images}]
  snapshotter = "overlayfs"
  [{images}.pinned_images]
    sandbox = "{PAUSE_IMAGE}"
  [{images}.registry]
    config_path = "{node.registry_config_dir}"
[{runtime}]
  restrict_oom_score_adj = true
  enable_selinux = false
  max_container_log_line_size = 16384
  [{runtime}.containerd]
    default_runtime_name = "runc"
    [{runtime}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      runtime_path = "{shim}"
      snapshotter = "overlayfs"
      [{runtime}.containerd.runtimes.runc.options]
        BinaryName = "{RUNC}"
        SystemdCgroup = false
  [{runtime}.cni]
    bin_dirs = [{bin_dirs}]
    conf_dir = "{node.cni_conf_dir}"
"""


def registry_hosts_toml(host: str, *, ca_file: Path, name: str | None = None) -> str:
    """containerd's hosts.toml for the test bed's registry ``host`` (``address:port``):
    HTTPS, trusting the cluster CA; pull and resolve only (credentials come from the
    pod's pull secrets, never from the node). With a ``name``, images named
    ``<name>/...`` are pulled from ``host`` (the project's images: ``registry.local``)."""
    return f"""\
server = "https://{name or host}"

[host."https://{host}"]
  capabilities = ["pull", "resolve"]
  ca = "{ca_file}"
"""


def cni_conflist(node: NodeLayout) -> str:
    """A bridge in the node's namespace, addresses from the node's pod range; no masquerade."""
    return json.dumps(cluster_network(node), indent=2)


def cluster_network(node: NodeLayout) -> dict[str, Any]:
    """The cluster network's conflist (multus delegates ``eth0`` to it when installed); a
    dual-stack node adds an IPv6 range (each pod gets one address of each family)."""
    ranges: list[list[dict[str, str]]] = [[{"subnet": node.pod_cidr, "gateway": node.pod_gateway}]]
    routes = [{"dst": "0.0.0.0/0"}]
    if node.v6 is not None:
        ranges.append([{"subnet": node.v6.pod_cidr, "gateway": node.v6.pod_gateway}])
        routes.append({"dst": "::/0"})
    ipam = {
        "type": "host-local",
        "ranges": ranges,
        "routes": routes,
        "dataDir": str(node.dir / "cni" / "ipam"),
    }
    bridge = {
        "type": "bridge",
        "bridge": "cni0",
        "isGateway": True,
        "ipMasq": False,
        "hairpinMode": True,
        "ipam": ipam,
    }
    return {"cniVersion": "1.0.0", "name": "kubevirt-py", "plugins": [bridge]}


def kubelet_yaml(node: NodeLayout, *, ca_file: Path, resources: NodeResources | None = None) -> str:
    extra = resources.kubelet_settings() if resources is not None else {}
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node.node_ip,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": node.cgroup_root,
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{node.containerd_socket}",
        "podLogsDir": "/var/log/pods",
        "resolvConf": str(node.config_dir / "resolv.conf"),
        "maxPods": 60,
        "serializeImagePulls": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "protectKernelDefaults": False,
        "localStorageCapacityIsolation": True,
        "nodeStatusReportFrequency": "10s",
        # Pod resync (default 1 min): it also picks up a grown block claim's new size
        # (NodeExpandVolume for a running pod), which tests wait for.
        "syncFrequency": "10s",
        "shutdownGracePeriod": "0s",
        # A crashed container (a SIGKILLed virt-handler) restarts within a second however
        # often it crashed, instead of kubelet's 10 s doubling back-off (KEP-5593, beta
        # and on by default since 1.35): docs/hardening.md, "Handler restarts".
        "crashLoopBackOff": {"maxContainerRestartPeriod": "1s"},
        **extra,
    }
    return yaml.safe_dump(config, sort_keys=False)


def kube_proxy_yaml(node: NodeLayout, *, kubeconfig: Path) -> str:
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node.name,
        "bindAddress": node.node_ip,
        "clusterCIDR": node.cluster_cidrs,
        "mode": "iptables",
        "metricsBindAddress": "127.0.0.1:10249",
        "healthzBindAddress": "127.0.0.1:10256",
        # Conntrack limits are host-wide sysctls: leave them alone.
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "iptables": {"localhostNodePorts": False, "masqueradeAll": False},
        "nodePortAddresses": [
            f"{node.node_ip}/32",
            *([f"{node.v6.node_ip}/128"] if node.v6 is not None else []),
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)
