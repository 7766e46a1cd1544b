"""Multus on the real nodes: secondary networks for launcher pods.

- **The plugin**: multus-cni's thin plugin (scripts/build-multus, the Go module at v4.2.2) is
  each node's primary CNI plugin (``00-multus.conf``, first in the conf dir, so containerd
  runs it): it delegates the pod's ``eth0`` to the cluster network (the node's bridge
  conflist, unchanged) and adds one interface per entry of the pod's
  ``k8s.v1.cni.cncf.io/networks`` annotation, from the NetworkAttachmentDefinition it names.
  It reads pods and NADs (and writes the network-status annotation) as the user
  ``system:multus`` (a client certificate of the cluster CA), allowed by the ClusterRole here.
- **The CRD**: NetworkAttachmentDefinition (``k8s.cni.cncf.io/v1``, the Network Plumbing
  Working Group's schema: ``spec.config``, a CNI config as a JSON string).
- **A secondary link between nodes**: every node's namespace gets ``sec0``, a veth to the
  host bridge ``kvsb<block>`` (no address: layer 2 only, nothing routed), enslaved to the
  node's bridge ``kvsec0``. A NAD using the ``bridge`` plugin on ``kvsec0`` with addresses
  from the block's ``.14.0/24`` joins pods on different nodes.
- **A migration network**: the same again on its own bridges (``mig0`` → ``kvmig0`` in each
  node, ``kvmb<block>`` on the host, which holds ``.13.1`` so that tests reach the proxies
  there as any peer on that network could), and the NAD ``kubevirt/migration-network``, which
  the KubeVirt CR's ``migrations.network`` names (localkube/deploy.py): the handler pods'
  ``migration0`` get addresses from the block's ``.13.0/24`` by ``host-local``, whose lease
  directory is one that every node sees (``<nodes dir>/_shared/migration-ipam``), so leases
  are unique across nodes (a production cluster would use whereabouts or DHCP).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from localkube.procs import run_cmd
from localkube.realnode.configs import CNI_BIN_DIR
from localkube.realnode.storage import SHARED_SUBDIR

CONF_NAME = "00-multus.conf"
USER = "multus"  # the client certificate's name; CN system:multus
NODE_BRIDGE = "kvsec0"  # in each node's namespace: NADs attach pods here
NODE_LINK = "sec0"  # the node end of the secondary veth
MIGRATION_BRIDGE = "kvmig0"  # in each node's namespace: the migration network's bridge
MIGRATION_LINK = "mig0"  # the node end of the migration network's veth
MIGRATION_NAD = "migration-network"  # in the install namespace (kubevirt)
INSTALL_NAMESPACE = "kubevirt"
GROUP = "k8s.cni.cncf.io"


def built(multus_dir: Path | None) -> bool:
    """Multus is in use when scripts/build-multus' plugin is in ``multus_dir``. A cluster
    given the directory before the plugin is built (``scripts/up`` builds it after the demo
    VM) lists it among containerd's CNI plugin dirs from the start, and a later ``up`` of the
    same cluster turns multus on: containerd reads its CNI conf dir as it changes."""
    return multus_dir is not None and (multus_dir / "multus").is_file()


def conf(*, delegate: dict[str, Any], kubeconfig: Path, node_dir: Path) -> str:
    """The node's multus configuration, delegating the cluster network to `delegate`."""
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "multus-cni-network",
            "type": "multus",
            "kubeconfig": str(kubeconfig),
            "binDir": CNI_BIN_DIR,
            "cniDir": str(node_dir / "cni" / "multus"),
            "logFile": str(node_dir / "multus.log"),
            "logLevel": "verbose",
            "delegates": [delegate],
        },
        indent=2,
    )


def crd() -> dict[str, Any]:
    """The NetworkAttachmentDefinition CRD (k8s.cni.cncf.io/v1)."""
    spec_schema = {
        "type": "object",
        "properties": {"config": {"type": "string"}},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"network-attachment-definitions.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "plural": "network-attachment-definitions",
                "singular": "network-attachment-definition",
                "kind": "NetworkAttachmentDefinition",
                "shortNames": ["net-attach-def"],
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema,
                            },
                        }
                    },
                }
            ],
        },
    }


def rbac() -> list[dict[str, Any]]:
    """What the thin plugin reads and writes, for the user system:multus."""
    rules = [
        {"apiGroups": [GROUP], "resources": ["*"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods", "pods/status"],
         "verbs": ["get", "list", "watch", "update", "patch"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"],
         "verbs": ["create", "patch", "update"]},
    ]  # fmt: skip
    name, api = "kubevirt-py-test-bed:multus", "rbac.authorization.k8s.io"
    return [
        {
            "apiVersion": f"{api}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        },
        {
            "apiVersion": f"{api}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": api, "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": api, "kind": "User", "name": f"system:{USER}"}],
        },
    ]


def migration_ipam(nodes_dir: Path) -> Path:
    """host-local's leases of the migration network: a directory every node sees alike
    (removed at `down`, with the leases of pods that are gone)."""
    return nodes_dir / SHARED_SUBDIR / "migration-ipam"


def migration_network(*, cidr: str, ipam_dir: Path) -> list[dict[str, Any]]:
    """The install namespace and the migration network's NAD (bridge on kvmig0)."""
    config = {
        "cniVersion": "0.4.0",
        "name": MIGRATION_NAD,
        "type": "bridge",
        "bridge": MIGRATION_BRIDGE,
        "ipMasq": False,
        "isGateway": False,
        "ipam": {"type": "host-local", "ranges": [[{"subnet": cidr}]], "dataDir": str(ipam_dir)},
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": INSTALL_NAMESPACE}},
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": MIGRATION_NAD, "namespace": INSTALL_NAMESPACE},
            "spec": {"config": json.dumps(config)},
        },
    ]


async def apply(
    *, kubectl: Path, kubeconfig: Path, manifest: Path, extra: list[dict[str, Any]] | None = None
) -> None:
    """The CRD (established) and the plugin's RBAC in the cluster; then `extra` (NADs)."""
    items = [crd(), *rbac()]
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    base = [str(kubectl), "--kubeconfig", str(kubeconfig)]
    await run_cmd([*base, "apply", "-f", str(manifest)], timeout=60)
    await run_cmd(
        [*base, "wait", "--for=condition=Established", "--timeout=60s",
         f"crd/network-attachment-definitions.{GROUP}"],
        timeout=90,
    )  # fmt: skip
    if extra:
        manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": extra}))
        await run_cmd([*base, "apply", "-f", str(manifest)], timeout=60)


async def ensure_host_bridge(bridge: str) -> None:
    """The secondary network's host bridge: no address, layer 2 only."""
    if not Path(f"/sys/class/net/{bridge}").exists():
        await run_cmd(["ip", "link", "add", bridge, "type", "bridge"])
    await run_cmd(["ip", "link", "set", bridge, "up"])


async def ensure_link(
    *,
    netns: str,
    host_veth: str,
    host_bridge: str,
    node_link: str = NODE_LINK,
    node_bridge: str = NODE_BRIDGE,
) -> None:
    """The node's ``sec0`` (a veth to the host bridge) enslaved to its ``kvsec0`` (or the
    migration network's ``mig0`` and ``kvmig0``)."""
    inside = ["ip", "netns", "exec", netns]
    if not Path(f"/sys/class/net/{host_veth}").exists():
        await run_cmd(
            ["ip", "link", "add", host_veth, "type", "veth",
             "peer", "name", node_link, "netns", netns]
        )  # fmt: skip
    await run_cmd(["ip", "link", "set", host_veth, "master", host_bridge, "up"])
    links = await run_cmd([*inside, "ip", "-o", "link", "show"])
    if f" {node_bridge}:" not in links:
        await run_cmd([*inside, "ip", "link", "add", node_bridge, "type", "bridge"])
    await run_cmd([*inside, "ip", "link", "set", node_bridge, "up"])
    await run_cmd([*inside, "ip", "link", "set", node_link, "master", node_bridge, "up"])
