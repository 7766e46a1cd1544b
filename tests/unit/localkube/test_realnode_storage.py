"""The real nodes' local storage: a default StorageClass that binds on first consumer and
static local PVs, each a directory of its node and pinned to that node."""

from __future__ import annotations

from pathlib import Path

from localkube.realnode.storage import STORAGE_CLASS, LocalStorage


def test_each_node_gets_its_own_pinned_volumes(tmp_path: Path) -> None:
    """per_node PVs per node, each under that node's directory with nodeAffinity to it,
    in the default WaitForFirstConsumer class; nothing is deleted when a claim goes."""
    storage = LocalStorage(nodes=("node01", "node02"), nodes_dir=tmp_path, per_node=2)
    sc, *pvs = storage.manifests()
    assert sc["kind"] == "StorageClass" and sc["metadata"]["name"] == STORAGE_CLASS
    assert sc["volumeBindingMode"] == "WaitForFirstConsumer"
    assert sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    assert len(pvs) == 4 and len({pv["metadata"]["name"] for pv in pvs}) == 4
    for pv in pvs:
        spec = pv["spec"]
        (term,) = spec["nodeAffinity"]["required"]["nodeSelectorTerms"]
        (node,) = term["matchExpressions"][0]["values"]
        assert Path(spec["local"]["path"]).is_relative_to(tmp_path / node)
        assert spec["storageClassName"] == STORAGE_CLASS
        assert spec["persistentVolumeReclaimPolicy"] == "Retain"
        assert spec["volumeMode"] == "Filesystem"
