"""The CSI stack's processes and API objects: the controller side and the sidecars on the
host, one node side per node inside that node's namespaces, the default StorageClass
csi-local (expandable, Immediate) and VolumeSnapshotClass csi-local-snapshots; without the
sidecars' build the stack says how to get it."""

from __future__ import annotations

from pathlib import Path

import pytest

from localkube.config import ClusterConfig, NodeKind
from localkube.csi.service import DRIVER
from localkube.csi.stack import SNAPSHOT_CLASS, STORAGE_CLASS, CsiStack
from localkube.errors import ComponentFailed


def _stack(tmp_path: Path, csi_dir: Path | None) -> CsiStack:
    config = ClusterConfig(
        state_dir=tmp_path / "state", nodes_dir=tmp_path / "nodes", bin_dir=tmp_path / "bin",
        node_kind=NodeKind.KUBELET, csi_dir=csi_dir,
    )  # fmt: skip
    enter: dict[str, tuple[str, ...]] = {
        n: ("nsenter", f"--net=/run/netns/{n}", "--") for n in config.nodes
    }
    return CsiStack(config=config, marker=("M", "x"), node_enter=enter)


def test_processes_and_where_they_run(tmp_path: Path) -> None:
    """Controller, provisioner, snapshotter, snapshot-controller and expander on the host
    (the sidecars on the controller's socket); each node's driver entered into its node."""
    stack = _stack(tmp_path, tmp_path / "csi")
    specs = {s.name: s for s in stack.specs()}
    assert list(specs) == [
        "csi-controller", "csi-provisioner", "csi-snapshotter", "snapshot-controller",
        "csi-expander", "csi-node-node01", "csi-node-node02",
    ]  # fmt: skip
    assert specs["csi-provisioner"].argv[0] == str(tmp_path / "csi" / "csi-provisioner")
    assert f"--csi-address={stack.endpoint}" in specs["csi-snapshotter"].argv
    node = specs["csi-node-node02"].argv
    assert node[:3] == ("nsenter", "--net=/run/netns/node02", "--")
    assert "--node-id=node02" in node and f"--root={stack.root}" in node
    assert stack.root == tmp_path / "nodes" / "_csi"


def test_default_classes(tmp_path: Path) -> None:
    """The CSIDriver needs no attach; csi-local and csi-local-snapshots are the defaults."""
    driver, sc, vsc = _stack(tmp_path, tmp_path / "csi").manifests()
    assert driver["metadata"]["name"] == DRIVER and driver["spec"]["attachRequired"] is False
    assert sc["metadata"]["name"] == STORAGE_CLASS and sc["provisioner"] == DRIVER
    assert sc["allowVolumeExpansion"] is True and sc["volumeBindingMode"] == "Immediate"
    assert sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    assert vsc["metadata"]["name"] == SNAPSHOT_CLASS and vsc["driver"] == DRIVER
    default = "snapshot.storage.kubernetes.io/is-default-class"
    assert vsc["metadata"]["annotations"][default] == "true"


def test_missing_sidecars_say_how_to_build_them(tmp_path: Path) -> None:
    """No sidecar build known: ComponentFailed naming scripts/build-csi-sidecars."""
    with pytest.raises(ComponentFailed, match="scripts/build-csi-sidecars"):
        _stack(tmp_path, None).specs()
