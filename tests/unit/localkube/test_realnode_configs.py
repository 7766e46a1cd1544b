"""Real nodes' addresses and configuration files: the settings that mattered on this machine."""

from __future__ import annotations

import ipaddress
import json
import tomllib
from pathlib import Path

import pytest
import yaml

from localkube.config import ClusterConfig, NodeKind
from localkube.realnode import configs, multus, noderes
from localkube.realnode.configs import NodeLayout
from localkube.realnode.fleet import Fleet
from localkube.realnode.netplan import BLOCKS, NetPlan, NetPlanError
from localkube.realnode.noderes import NodeResources

SUPERNET = ipaddress.ip_network("198.18.0.0/15")


def _layout(tmp_path: Path) -> NodeLayout:
    plan = NetPlan(block=3)
    return NodeLayout(
        name="node01",
        dir=tmp_path / "node01",
        node_ip=plan.node_ip(1),
        pod_cidr=plan.pod_cidr(1),
        pod_gateway=plan.pod_gateway(1),
        cluster_cidr=plan.cluster_cidr,
        cgroup_root="/kvpy3-node01",
        routes=((plan.pod_cidr(2), plan.node_ip(2)),),
    )


@pytest.mark.parametrize("block", [0, 7, BLOCKS - 1])
def test_every_address_is_inside_the_benchmark_range(block: int) -> None:
    """Node, pod, Service and gateway addresses of any block lie in 198.18.0.0/15, and the
    ranges of one block do not overlap."""
    plan = NetPlan(block=block)
    nets = [ipaddress.ip_network(plan.node_cidr), ipaddress.ip_network(plan.service_cidr)]
    nets += [ipaddress.ip_network(plan.pod_cidr(i)) for i in (1, 2, 12)]
    nets.append(ipaddress.ip_network(f"{plan.secondary_addr(0)}/24"))
    nets.append(ipaddress.ip_network(plan.migration_cidr))
    for net in nets:
        assert net.subnet_of(SUPERNET)  # type: ignore[arg-type]
    for a in nets:
        for b in nets:
            assert a is b or not a.overlaps(b)
    assert ipaddress.ip_address(plan.gateway) in nets[0]
    assert ipaddress.ip_address(plan.kubernetes_service_ip) in nets[1]
    assert ipaddress.ip_network(plan.cluster_cidr).subnet_of(SUPERNET)  # type: ignore[arg-type]


def test_blocks_are_disjoint_and_names_fit_interfaces() -> None:
    """Two clusters never share addresses; interface names fit Linux's 15 characters."""
    a, b = NetPlan(block=0), NetPlan(block=1)
    assert not ipaddress.ip_network(a.cluster_cidr).overlaps(ipaddress.ip_network(b.cluster_cidr))
    last = NetPlan(block=BLOCKS - 1)
    assert len(last.bridge) <= 15 and len(last.host_veth(12)) <= 15
    assert len(last.secondary_bridge) <= 15 and len(last.secondary_veth(12)) <= 15
    assert len(last.migration_bridge) <= 15 and len(last.migration_veth(12)) <= 15


def test_node_index_out_of_range_is_refused() -> None:
    """A 13th node has no pod range (.13.0/24 is the migration network's): a clear error,
    not an overlapping range."""
    with pytest.raises(NetPlanError, match="node index 13"):
        NetPlan(block=0).pod_cidr(13)


def test_pick_skips_blocks_in_use_and_keeps_its_choice(tmp_path: Path) -> None:
    """A new cluster takes the lowest free block; later loads return the saved one."""
    path = tmp_path / "net.json"
    assert NetPlan.load_or_pick(path, taken={0, 1}).block == 2
    assert NetPlan.load_or_pick(path, taken={0, 1, 2}).block == 2
    with pytest.raises(NetPlanError):
        NetPlan.load_or_pick(tmp_path / "other.json", taken=set(range(BLOCKS)))


def test_containerd_settings_that_mattered(tmp_path: Path) -> None:
    """containerd 2's version-3 config: private sockets and state, runc with cgroupfs and
    the shim built with containerd, restricted oom_score_adj, the local pause image and
    Debian's CNI plugins."""
    node = _layout(tmp_path)
    shim = Path("/cache/containerd/bin/containerd-shim-runc-v2")
    doc = tomllib.loads(configs.containerd_toml(node, shim=shim))
    assert doc["version"] == 3
    assert doc["grpc"]["address"] == str(node.containerd_socket)
    assert doc["root"].startswith(str(node.dir)) and doc["state"].startswith(str(node.dir))
    images = doc["plugins"]["io.containerd.cri.v1.images"]
    assert images["pinned_images"]["sandbox"] == configs.PAUSE_IMAGE
    cri = doc["plugins"]["io.containerd.cri.v1.runtime"]
    assert cri["restrict_oom_score_adj"] is True
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["runtime_path"] == str(shim)
    assert runc["options"] == {"BinaryName": "/usr/sbin/runc", "SystemdCgroup": False}
    assert cri["cni"] == {"bin_dirs": ["/usr/lib/cni"], "conf_dir": str(node.cni_conf_dir)}
    assert "io.containerd.grpc.v1.cri" not in doc["plugins"]  # no version-2 section left


def test_cni_network_never_masquerades(tmp_path: Path) -> None:
    """The pod bridge hands out the node's own range and masquerades nothing."""
    node = _layout(tmp_path)
    bridge = json.loads(configs.cni_conflist(node))["plugins"][0]
    assert bridge["ipMasq"] is False
    assert bridge["ipam"]["ranges"] == [[{"subnet": node.pod_cidr, "gateway": node.pod_gateway}]]


def test_kubelet_runs_on_v1_cgroups_under_its_own_root(tmp_path: Path) -> None:
    """cgroupfs under the node's own root, cgroup v1 allowed, no swap check, client
    certificates for kube-apiserver, no image GC of the images built here, and pods
    resynced every 10 s (a grown block claim reaches its running pod that soon)."""
    node = _layout(tmp_path)
    cfg = yaml.safe_load(configs.kubelet_yaml(node, ca_file=Path("/ca.crt")))
    assert cfg["cgroupDriver"] == "cgroupfs" and cfg["cgroupRoot"] == "/kvpy3-node01"
    assert cfg["failCgroupV1"] is False and cfg["failSwapOn"] is False
    assert cfg["address"] == node.node_ip and cfg["readOnlyPort"] == 0
    assert cfg["authentication"]["x509"] == {"clientCAFile": "/ca.crt"}
    assert cfg["authentication"]["anonymous"] == {"enabled": False}
    assert cfg["imageGCHighThresholdPercent"] == 100
    assert cfg["containerRuntimeEndpoint"] == f"unix://{node.containerd_socket}"
    assert cfg["syncFrequency"] == "10s"


def test_kube_proxy_leaves_host_wide_sysctls_alone(tmp_path: Path) -> None:
    """kube-proxy touches no conntrack limit (host-wide) and knows the cluster's range."""
    node = _layout(tmp_path)
    cfg = yaml.safe_load(configs.kube_proxy_yaml(node, kubeconfig=Path("/kp")))
    assert cfg["conntrack"]["maxPerCore"] == 0 and cfg["conntrack"]["min"] == 0
    assert cfg["clusterCIDR"] == node.cluster_cidr and cfg["mode"] == "iptables"
    assert cfg["iptables"]["localhostNodePorts"] is False


def test_multus_is_the_primary_plugin_delegating_to_the_cluster_network(tmp_path: Path) -> None:
    """With multus built, containerd finds its binary beside Debian's plugins, and multus'
    configuration delegates eth0 to the unchanged cluster conflist, running the other
    plugins from Debian's directory with its own kubeconfig; the NAD CRD is k8s.cni.cncf.io/v1."""
    node = _layout(tmp_path)
    toml = configs.containerd_toml(node, shim=Path("/s"), cni_bin=(Path("/m/out"),))
    assert 'bin_dirs = ["/usr/lib/cni", "/m/out"]' in toml
    conf = json.loads(
        multus.conf(
            delegate=configs.cluster_network(node), kubeconfig=Path("/k"), node_dir=node.dir
        )
    )
    assert conf["type"] == "multus" and conf["kubeconfig"] == "/k"
    assert conf["binDir"] == "/usr/lib/cni"
    assert conf["delegates"] == [json.loads(configs.cni_conflist(node))]
    crd = multus.crd()
    assert crd["spec"]["group"] == "k8s.cni.cncf.io"
    assert crd["spec"]["names"]["kind"] == "NetworkAttachmentDefinition"
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1"]


def test_multus_named_before_it_is_built_turns_on_at_the_next_up(tmp_path: Path) -> None:
    """scripts/up's essentials cluster names multus' directory before the plugin is built:
    containerd lists it from the start, but no multus conf is written (pods get the cluster
    network alone); once the plugin is there, the next write of the node's configs (a later
    `up` of the running cluster) adds the conf, with containerd's configuration unchanged."""
    out = tmp_path / "multus" / "out"
    config = ClusterConfig(
        state_dir=tmp_path / "state", nodes_dir=tmp_path / "n", bin_dir=tmp_path,
        node_kind=NodeKind.KUBELET, multus_dir=out,
    )  # fmt: skip
    config.paths.root.mkdir(parents=True)
    (config.paths.root / "net.json").write_text(json.dumps({"block": 3}))
    node = Fleet(config, marker=("M", "x")).node("node01")
    conf = node.layout.cni_conf_dir / multus.CONF_NAME
    toml = node.layout.config_dir / "containerd.toml"
    assert not multus.built(out) and not multus.built(None)
    node.write_configs()
    before = toml.read_text()
    assert f'"{out}"' in before and not conf.exists()
    out.mkdir(parents=True)
    (out / "multus").write_text("")
    node.write_configs()
    assert multus.built(out) and json.loads(conf.read_text())["type"] == "multus"
    assert toml.read_text() == before


def test_kubelet_static_cpu_manager_only_when_asked(tmp_path: Path) -> None:
    """The static CPU manager (with a 100m kube reservation: one whole CPU kept out of
    exclusive use) is in the kubelet's configuration only when the cluster asks for it."""
    node = _layout(tmp_path)
    plain = yaml.safe_load(configs.kubelet_yaml(node, ca_file=Path("/ca.crt")))
    assert "cpuManagerPolicy" not in plain and "kubeReserved" not in plain
    static = NodeResources(cpu_manager_static=True)
    cfg = yaml.safe_load(configs.kubelet_yaml(node, ca_file=Path("/ca.crt"), resources=static))
    assert cfg["cpuManagerPolicy"] == "static" and cfg["kubeReserved"] == {"cpu": "100m"}


def test_cpu_manager_checkpoint_of_another_policy_is_removed(tmp_path: Path) -> None:
    """A checkpoint written under another policy goes (the kubelet would refuse to start);
    one of the same policy stays."""
    state = tmp_path / noderes.CPU_MANAGER_STATE
    state.write_text(json.dumps({"policyName": "none", "defaultCpuSet": ""}))
    noderes.reset_stale_checkpoint(tmp_path, policy="none")
    assert state.exists()
    noderes.reset_stale_checkpoint(tmp_path, policy="static")
    assert not state.exists()


def test_hugepages_added_once_and_taken_back(tmp_path: Path) -> None:
    """The cluster adds its pages to what the host already had, once however often it
    starts, and takes back only its own share on the way down."""
    pool, state = tmp_path / "pool", tmp_path / "state"
    pool.mkdir()
    (pool / "nr_hugepages").write_text("10\n")
    lock = tmp_path / "lock"
    assert noderes.reserve_hugepages(state, 64, pool=pool, lock=lock) == 64
    assert noderes.reserve_hugepages(state, 64, pool=pool, lock=lock) == 64
    assert (pool / "nr_hugepages").read_text().strip() == "74"
    (pool / "nr_hugepages").write_text("80\n")  # another cluster added 6 meanwhile
    assert noderes.release_hugepages(state, pool=pool, lock=lock) == 64
    assert (pool / "nr_hugepages").read_text().strip() == "16"
    assert noderes.release_hugepages(state, pool=pool, lock=lock) == 0


def test_host_pages_stay_constant_while_clusters_come_and_go(tmp_path: Path) -> None:
    """The host's own pages (the pool less every recorded share under the state root) do not
    move when clusters reserve and release theirs, in any order."""
    pool, root, lock = tmp_path / "pool", tmp_path / "clusters", tmp_path / "lock"
    pool.mkdir()
    (pool / "nr_hugepages").write_text("10\n")
    assert noderes.host_pages(root, pool=pool, lock=lock) == 10
    noderes.reserve_hugepages(root / "a", 64, pool=pool, lock=lock)
    noderes.reserve_hugepages(root / "b", 32, pool=pool, lock=lock)
    assert noderes.host_pages(root, pool=pool, lock=lock) == 10
    noderes.release_hugepages(root / "a", pool=pool, lock=lock)
    assert noderes.host_pages(root, pool=pool, lock=lock) == 10
    noderes.release_hugepages(root / "b", pool=pool, lock=lock)
    assert (pool / "nr_hugepages").read_text().strip() == "10"
    assert noderes.host_pages(root, pool=pool, lock=lock) == 10
