"""Volumes a Windows-style VM brings, on real nodes, on one tiny guest: an `ephemeral`
volume (a claim on a static PV whose disk.img the test wrote) the guest reads and writes
while the claim's file keeps its bytes (the writes go to the launcher's overlay), and a
`sysprep` volume from a ConfigMap the guest mounts as a CD-ROM holding autounattend.xml
(label unattendCD), and reads its downward metrics (the node's name among them) on the
virtio-serial port org.github.vhostmd.1, answered by the handler, and on its
downwardMetrics volume (the vhostmd disk the handler rewrites). The ephemeral volume
keeps the VMI from live-migrating, named.
autoattachVSOCK: on nodes with /dev/vhost-vsock the guest gets a vsock device with the CID
its handler wrote in status.VSOCKCID; on nodes without (this host's kernel has no
vhost_vsock), the VMI stays unscheduled with a PodScheduled condition naming the
devices.kubevirt.io/vhost-vsock resource."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_node_labels import _unschedulable
from tests.integration.realnodes.test_shared_storage import _agent_connected, _domain_xml, _guest_sh
from tests.integration.realnodes.test_storage import _apply, _running
from tests.integration.realnodes.test_story import REPO, _wait

pytestmark = pytest.mark.cluster
NAME = "shares"
MARKER = b"KVPY-COUNT 41\n"
ANSWER = "<unattend>kvpy sysprep</unattend>"


def _vmi(claim: str) -> dict[str, Any]:
    vmi: dict[str, Any] = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    vmi["metadata"] = {"name": NAME}
    vmi["spec"]["terminationGracePeriodSeconds"] = 0
    vmi["spec"]["domain"]["devices"]["disks"] = [
        {"name": "containerdisk", "disk": {"bus": "virtio"}},
        {"name": "base", "disk": {"bus": "virtio"}},  # vdb
        {"name": "metricsdisk", "disk": {"bus": "virtio"}},  # vdc
        {"name": "answers", "cdrom": {"bus": "sata"}},  # sr0, the only CD-ROM
    ]
    vmi["spec"]["domain"]["devices"]["downwardMetrics"] = {}
    vmi["spec"]["volumes"] = [
        vmi["spec"]["volumes"][0],
        {"name": "base", "ephemeral": {"persistentVolumeClaim": {"claimName": claim}}},
        {"name": "answers", "sysprep": {"configMap": {"name": "answers"}}},
        {"name": "metricsdisk", "downwardMetrics": {}},
    ]
    return vmi


def _static_claim(k: Kubectl, cluster: Cluster, ns: str) -> Path:
    """A claim bound to a PV of our own on a directory every node sees, holding a 4 MiB
    raw disk.img that starts with MARKER; the directory."""
    directory = cluster.config.nodes_dir / "_shared" / f"ephemeral-{ns}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    (directory / "disk.img").write_bytes(MARKER.ljust(4 * 1024 * 1024, b"\0"))
    match = {
        "key": "kubernetes.io/hostname",
        "operator": "In",
        "values": list(cluster.config.nodes),
    }
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"ephemeral-{ns}"},
        "spec": {
            "capacity": {"storage": "64Mi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "local": {"path": str(directory)},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [match]}]}},
        },
    }
    k("apply", "-f", "-", stdin=json.dumps(pv))
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "golden"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "64Mi"}},
            "storageClassName": "",
            "volumeName": f"ephemeral-{ns}",
        },
    }
    _apply(k, ns, claim)
    return directory


# The guest's side of vm-dump-metrics: find the port by name, ask, read to </metrics>.
METRICS_SCRIPT = (
    "for p in /sys/class/virtio-ports/*; do "
    '[ "$(cat $p/name)" = org.github.vhostmd.1 ] && dev=/dev/${p##*/}; done; '
    # a write blocks until the handler has dialled the port: bounded, retried by the caller
    'timeout 8 sh -c \'exec 3<>"$1"; printf "GET /metrics/XML\\n\\n" >&3; '
    'sed "/<\\/metrics>/q" <&3\' _ "$dev"; true'
)


# The downwardMetrics volume: the vhostmd disk's first 16 KiB, the guest's cache dropped:
# Its signature, then the body past the 16-byte header (binary: checksum and length).
DISK_SCRIPT = (
    "echo 3 >/proc/sys/vm/drop_caches; dd if=/dev/vdc bs=4 count=1 2>/dev/null; "
    "dd if=/dev/vdc bs=4096 count=4 2>/dev/null | tail -c +17 | tr -d '\\000'"
)


def _metrics_disk(cluster: Cluster, vmi: dict[str, Any]) -> str | None:
    """The vhostmd disk as the guest reads it, once the handler has filled it."""
    out = _guest_sh(cluster, vmi, DISK_SCRIPT)
    return out if out.startswith("mvbd") and "<name>HostName</name>" in out else None


def _metrics(cluster: Cluster, vmi: dict[str, Any]) -> str | None:
    """The metrics document the guest read, once the handler answers the port."""
    out = _guest_sh(cluster, vmi, METRICS_SCRIPT)
    return out if "</metrics>" in out else None


def test_a_guest_reads_and_writes_an_ephemeral_volume_and_reads_its_sysprep_cd(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """ephemeral: the guest finds the claim's bytes on vdb and writes over them; the
    claim's disk.img is untouched. sysprep: sr0 is an ISO labelled unattendCD holding the
    ConfigMap's autounattend.xml. LiveMigratable=False naming the ephemeral volume."""
    k, ns = real_stack, real_namespace
    directory = _static_claim(k, real_cluster, ns)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "answers"},
        "data": {"autounattend.xml": ANSWER},
    }
    _apply(k, ns, config_map)
    _apply(k, ns, _vmi("golden"))
    vmi = _running(k, ns, NAME)
    _agent_connected(k, ns, NAME)

    found = _guest_sh(real_cluster, vmi, "dd if=/dev/vdb bs=14 count=1 2>/dev/null")
    assert found.encode() == MARKER
    script = (
        "printf 'KVPY-OVERLAY\\n' | dd of=/dev/vdb conv=notrunc,fsync 2>/dev/null && "
        "echo 3 >/proc/sys/vm/drop_caches && dd if=/dev/vdb bs=13 count=1 2>/dev/null"
    )
    assert _guest_sh(real_cluster, vmi, script) == "KVPY-OVERLAY\n"
    assert (directory / "disk.img").read_bytes()[: len(MARKER)] == MARKER

    script = (
        "mkdir -p /mnt/sysprep && mount -t iso9660 -o ro /dev/sr0 /mnt/sysprep && "
        "cat /mnt/sysprep/autounattend.xml && echo && "
        "dd if=/dev/sr0 bs=1 skip=32808 count=32 2>/dev/null | tr -d ' \\000'"
    )
    assert _guest_sh(real_cluster, vmi, script) == f"{ANSWER}\nunattendCD"

    metrics = _wait(lambda: _metrics(real_cluster, vmi), 60, "the guest's downward metrics")
    assert f"<name>HostName</name>\n    <value>{vmi['status']['nodeName']}</value>" in metrics
    assert "<name>ResourceProcessorLimit</name>" in metrics
    disk = _wait(lambda: _metrics_disk(real_cluster, vmi), 60, "the guest's metrics disk")
    assert f"<value>{vmi['status']['nodeName']}</value>" in disk

    conds = json.loads(k("get", "vmi", NAME, "-n", ns, "-o", "json"))["status"]["conditions"]
    (migratable,) = [c for c in conds if c["type"] == "LiveMigratable"]
    assert (migratable["status"], migratable["reason"]) == ("False", "DisksNotLiveMigratable")
    assert "ephemeral volume (volume base)" in migratable["message"]


def test_autoattach_vsock_gets_a_node_cid_or_names_the_missing_device(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """With /dev/vhost-vsock on the nodes: Running, status.VSOCKCID >= 3 and the domain's
    <vsock> carries it. Without: PodScheduled=False, Unschedulable, naming the
    devices.kubevirt.io/vhost-vsock resource the launcher pod asks for and /dev/vhost-vsock."""
    k, ns = real_stack, real_namespace
    vmi = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    vmi["metadata"] = {"name": "vsock"}
    vmi["spec"]["terminationGracePeriodSeconds"] = 0
    vmi["spec"]["domain"]["devices"]["autoattachVSOCK"] = True
    _apply(k, ns, vmi)
    if Path("/dev/vhost-vsock").exists():  # the nodes share this host's kernel
        running = _running(k, ns, "vsock")
        cid = running["status"]["VSOCKCID"]
        assert cid >= 3
        vsock = _domain_xml(real_cluster, running).find("devices/vsock/cid")
        assert vsock is not None and vsock.get("address") == str(cid)
        return
    cond = _wait(lambda: _unschedulable(k, ns, "vsock"), 120, "vsock VMI Unschedulable")
    assert cond["reason"] == "Unschedulable" and cond["phase"] in ("Pending", "Scheduling")
    assert "devices.kubevirt.io/vhost-vsock" in cond["message"], cond
    assert "needs /dev/vhost-vsock on the node" in cond["message"], cond
