"""The test bed's registry: its address in the cluster's block, containerd's trust of it (the
hosts.toml under config_path), distribution's configuration (TLS, htpasswd), credentials kept
per cluster, and a pull secret for it."""

from __future__ import annotations

import base64
import json
import stat
import tomllib
from pathlib import Path

import yaml

from localkube import registry
from localkube.cluster import Cluster
from localkube.config import ClusterConfig, NodeKind
from localkube.pki import Pki
from localkube.realnode import configs
from localkube.realnode.fleet import Fleet
from localkube.realnode.netplan import NetPlan
from tests.unit.localkube.test_realnode_configs import _layout


def _config(tmp_path: Path) -> ClusterConfig:
    return ClusterConfig(state_dir=tmp_path / "state", nodes_dir=tmp_path / "n", bin_dir=tmp_path)


def test_the_registry_listens_on_the_blocks_gateway() -> None:
    """host:port is the cluster bridge's gateway (reachable from every node) and PORT."""
    plan = NetPlan(block=5)
    assert registry.host(plan) == f"{plan.gateway}:{registry.PORT}"


def test_containerd_trusts_the_cluster_ca_for_the_registry(tmp_path: Path) -> None:
    """containerd's config_path is the node's certs.d; the registry's hosts.toml names HTTPS,
    the cluster CA and pull/resolve only."""
    node = _layout(tmp_path)
    doc = tomllib.loads(configs.containerd_toml(node, shim=Path("/s")))
    images = doc["plugins"]["io.containerd.cri.v1.images"]
    assert images["registry"] == {"config_path": str(node.registry_config_dir)}
    hosts = tomllib.loads(configs.registry_hosts_toml("198.18.0.1:5443", ca_file=Path("/ca.crt")))
    assert hosts["server"] == "https://198.18.0.1:5443"
    assert hosts["host"]["https://198.18.0.1:5443"] == {
        "capabilities": ["pull", "resolve"], "ca": "/ca.crt",
    }  # fmt: skip


def test_distribution_serves_tls_with_htpasswd(tmp_path: Path) -> None:
    """The configuration: filesystem storage, the registry certificate of the cluster CA,
    htpasswd authentication, the address given."""
    pki = Pki(tmp_path / "pki")
    doc = yaml.safe_load(
        registry.registry_yaml(
            addr="198.18.0.1:5443", root=tmp_path / "data", pki=pki,
            htpasswd=tmp_path / "htpasswd", secret="x",
        )
    )  # fmt: skip
    assert doc["http"]["addr"] == "198.18.0.1:5443"
    assert doc["http"]["tls"] == {
        "certificate": str(pki.crt(registry.CERT)), "key": str(pki.key(registry.CERT)),
    }  # fmt: skip
    assert doc["auth"]["htpasswd"]["path"] == str(tmp_path / "htpasswd")
    assert doc["storage"]["filesystem"]["rootdirectory"] == str(tmp_path / "data")


def test_credentials_are_made_once_and_kept_private(tmp_path: Path) -> None:
    """A random password per cluster state dir, 0600, the same on every read."""
    config, plan = _config(tmp_path), NetPlan(block=0)
    first = registry.endpoint(config, plan)
    assert first.username == registry.USER and len(first.password) >= 20
    assert registry.endpoint(config, plan) == first
    path = config.paths.root / "registry" / "credentials.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert first.ca_file == Pki(config.paths.pki).crt("ca")


def test_the_pull_secret_names_the_registry_host(tmp_path: Path) -> None:
    """.dockerconfigjson: the host's username, password and their base64 `auth`; the guest
    image's reference on that host."""
    ep = registry.endpoint(_config(tmp_path), NetPlan(block=2))
    entry = ep.docker_config()["auths"][ep.host]  # type: ignore[index]
    assert base64.b64decode(entry["auth"]).decode() == f"{ep.username}:{ep.password}"
    assert ep.image() == f"{ep.host}/kubevirt-py/tiny-guest:v1"
    json.dumps(ep.docker_config())  # serialisable as is


def test_nodes_of_a_cluster_with_a_registry_trust_it(tmp_path: Path) -> None:
    """A cluster built with the registry: each node's inputs name the registry's host and
    its configs include that host's hosts.toml with the cluster CA; without: none."""
    config = _config(tmp_path).replace(node_kind=NodeKind.KUBELET, registry_dir=tmp_path / "r")
    (config.paths.root).mkdir(parents=True)
    (config.paths.root / "net.json").write_text(json.dumps({"block": 4}))
    node = Fleet(config, marker=("M", "x")).node("node01")
    want = registry.host(NetPlan(block=4))
    assert node.inputs.registry_host == want
    node.write_configs()
    hosts = tomllib.loads((node.layout.registry_config_dir / want / "hosts.toml").read_text())
    assert hosts["host"][f"https://{want}"]["ca"] == str(node.inputs.ca_file)
    bare = Fleet(config.replace(registry_dir=None), marker=("M", "x")).node("node01")
    assert bare.inputs.registry_host is None
    assert Cluster(config.replace(registry_dir=None)).registry() is None
