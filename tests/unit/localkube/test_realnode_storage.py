"""The real nodes' local storage: a StorageClass (not the default: the CSI stack's
csi-local is) that binds on first consumer and
static local PVs, each a directory of its node and pinned to that node; and a shared
(ReadWriteMany) class whose PVs are one directory every node mounts."""

from __future__ import annotations

from pathlib import Path

from localkube.realnode.storage import SHARED_STORAGE_CLASS, STORAGE_CLASS, LocalStorage


def test_each_node_gets_its_own_pinned_volumes(tmp_path: Path) -> None:
    """per_node PVs per node, each under that node's directory with nodeAffinity to it,
    in the WaitForFirstConsumer local-storage class (not the default); nothing is deleted when a claim goes."""
    storage = LocalStorage(nodes=("node01", "node02"), nodes_dir=tmp_path, per_node=2, shared=0)
    sc, _shared_sc, *pvs = storage.manifests()
    assert sc["kind"] == "StorageClass" and sc["metadata"]["name"] == STORAGE_CLASS
    assert sc["volumeBindingMode"] == "WaitForFirstConsumer"
    assert sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "false"
    assert len(pvs) == 4 and len({pv["metadata"]["name"] for pv in pvs}) == 4
    for pv in pvs:
        spec = pv["spec"]
        (term,) = spec["nodeAffinity"]["required"]["nodeSelectorTerms"]
        (node,) = term["matchExpressions"][0]["values"]
        assert Path(spec["local"]["path"]).is_relative_to(tmp_path / node)
        assert spec["storageClassName"] == STORAGE_CLASS
        assert spec["persistentVolumeReclaimPolicy"] == "Retain"
        assert spec["volumeMode"] == "Filesystem"


def test_shared_volumes_are_read_write_many_on_every_node(tmp_path: Path) -> None:
    """The shared class is not the default and binds at once; each of its PVs is
    ReadWriteMany, may be mounted on every node, and lives outside every node's own
    directory (one path all nodes' mount namespaces see)."""
    nodes = ("node01", "node02")
    storage = LocalStorage(nodes=nodes, nodes_dir=tmp_path, per_node=1, shared=2)
    items = storage.manifests()
    (sc,) = [i for i in items if i["metadata"]["name"] == SHARED_STORAGE_CLASS]
    assert sc["volumeBindingMode"] == "Immediate"
    assert "annotations" not in sc["metadata"]
    shared = [
        i
        for i in items
        if i["kind"] == "PersistentVolume" and i["spec"]["storageClassName"] == SHARED_STORAGE_CLASS
    ]
    assert len(shared) == 2
    for pv in shared:
        spec = pv["spec"]
        assert spec["accessModes"] == ["ReadWriteMany"]
        (term,) = spec["nodeAffinity"]["required"]["nodeSelectorTerms"]
        assert term["matchExpressions"][0]["values"] == list(nodes)
        path = Path(spec["local"]["path"])
        assert path.is_relative_to(tmp_path)
        assert not any(path.is_relative_to(tmp_path / n) for n in nodes)
    assert {Path(pv["spec"]["local"]["path"]) for pv in shared} <= set(storage.dirs())
