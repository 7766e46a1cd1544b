"""Config volumes on real nodes: a VMI with a configMap, a secret and a serviceAccount
volume. The real kubelet mounts the objects into the launcher pod (the controller reads
none of them), the launcher makes ISOs of them, and the guest mounts each ISO and prints a
file of it on the console (kvpy.cat=), with the ISO's label. The same VMI shares the
ConfigMap and a claim through virtiofs (devices.filesystems): each served by an
unprivileged virtiofsd in its own container; the guest mounts both tags (kvpy.fs=), reads
the ConfigMap's key, and writes a file on the claim and reads it back. Its config drive
carries the tagged NIC and disk in meta_data.json's "devices" (device role tagging)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_nonroot import _ids
from tests.integration.realnodes.test_storage import _apply, _claim, _running
from tests.integration.realnodes.test_story import _serial, _wait

pytestmark = pytest.mark.cluster
GUEST_IMAGE = "registry.local/kubevirt-py/tiny-guest:v1"
META = "vdd:/openstack/latest/meta_data.json"  # the config drive's
CATS = f"vda:/greeting,vdb:/password,vdc:/namespace,{META}"
SHARES = "cfgfs,datafs"  # devices.filesystems' tags


def _vmi() -> dict[str, Any]:
    disks = [{"name": n, "disk": {"bus": "virtio"}} for n in ("cfg", "creds", "sa", "drive")]
    disks[0]["tag"] = "app-config"  # device tags: in the config drive's meta_data.json
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "vmi-config"},
        "spec": {
            "domain": {
                "devices": {
                    "disks": disks,
                    "interfaces": [{"name": "default", "masquerade": {}, "tag": "frontend"}],
                    "filesystems": [{"name": n, "virtiofs": {}} for n in SHARES.split(",")],
                },
                "firmware": {
                    "kernelBoot": {
                        "container": {
                            "image": GUEST_IMAGE,
                            "initrdPath": "/boot/initrd.img",
                            "kernelPath": "/boot/vmlinuz",
                        },
                        "kernelArgs": f"console=ttyS0 panic=-1 quiet kvpy.cat={CATS} kvpy.fs={SHARES}",
                    }
                },
                "resources": {"requests": {"memory": "128Mi"}},
            },
            "networks": [{"name": "default", "pod": {}}],
            "terminationGracePeriodSeconds": 0,
            "volumes": [
                {"name": "cfg", "configMap": {"name": "app-config"}},
                {"name": "creds", "secret": {"secretName": "app-secret", "volumeLabel": "creds"}},
                {"name": "sa", "serviceAccount": {"serviceAccountName": "default"}},
                {"name": "drive", "cloudInitConfigDrive": {"userData": "#cloud-config\n"}},
                {"name": "cfgfs", "configMap": {"name": "app-config"}},
                {"name": "datafs", "persistentVolumeClaim": {"claimName": "config-fs-data"}},
            ],
        },
    }


def _cat(cluster: Cluster, vmi: dict[str, Any], what: str) -> tuple[str, str]:
    """The label and the text the guest printed for one kvpy.cat entry."""
    pattern = re.compile(
        rf"^KUBEVIRT-PY-CAT-BEGIN {re.escape(what)} label=(\S*)\r?\n(.*?)"
        rf"^KUBEVIRT-PY-CAT-END {re.escape(what)}",
        re.M | re.S,
    )

    def probe() -> tuple[str, str] | None:
        log = _serial(cluster, vmi)
        if f"KUBEVIRT-PY-CAT-FAILED {what}" in log:
            raise AssertionError(log[-800:])
        found = pattern.search(log)
        return (found.group(1), found.group(2).replace("\r", "")) if found else None

    result: tuple[str, str] = _wait(
        probe, 240, f"the guest's {what}", lambda: _serial(cluster, vmi)[-800:]
    )
    return result


def test_a_guest_reads_config_map_secret_and_service_account_isos(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """configMap → ISO labelled cfgdata holding its key; secret → ISO labelled with its
    volumeLabel holding the decoded value; serviceAccount → ISO holding the namespace
    (and token, ca.crt); the pod runs as the account and mounts no token elsewhere."""
    k, ns = real_stack, real_namespace
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "app-config"},
        "data": {"greeting": "hello from a configMap"},
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "app-secret"},
        "stringData": {"password": "s3cr3t-value"},
    }
    for obj in (config_map, secret, _claim("config-fs-data"), _vmi()):
        _apply(k, ns, obj)
    vmi = _running(k, ns, "vmi-config")
    assert _cat(real_cluster, vmi, "vda:/greeting") == ("cfgdata", "hello from a configMap\n")
    assert _cat(real_cluster, vmi, "vdb:/password") == ("creds", "s3cr3t-value\n")
    assert _cat(real_cluster, vmi, "vdc:/namespace") == ("cfgdata", f"{ns}\n")
    pods = json.loads(k("get", "pods", "-n", ns, "-o", "json"))["items"]
    assert [p["spec"]["serviceAccountName"] for p in pods] == ["default"]
    _check_virtiofs_shares(real_cluster, vmi, pods[0])
    _check_device_tags(real_cluster, vmi)


def _check_device_tags(cluster: Cluster, vmi: dict[str, Any]) -> None:
    """The config drive's meta_data.json lists the tagged NIC (PCI address, MAC) and the
    tagged disk (PCI address), as libvirt placed them; untagged disks are not listed."""
    label, text = _cat(cluster, vmi, META)
    assert label == "config-2"
    devices = json.loads(text)["devices"]
    assert [(d["type"], d["tags"]) for d in devices] == [
        ("nic", ["frontend"]),
        ("disk", ["app-config"]),
    ], devices
    pci = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
    assert all(d["bus"] == "pci" and pci.fullmatch(d["address"]) for d in devices), devices
    assert re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", devices[0]["mac"]), devices


def _fs_lines(cluster: Cluster, vmi: dict[str, Any]) -> list[str]:
    """The guest's KUBEVIRT-PY-FS lines, once it reported both shares' writes."""

    def probe() -> list[str] | None:
        log = _serial(cluster, vmi)
        lines = [x.strip() for x in re.findall(r"^KUBEVIRT-PY-FS-.*$", log, re.M)]
        return lines if len([x for x in lines if "-WRITE " in x or "-FAILED " in x]) >= 2 else None

    found: list[str] = _wait(
        probe, 240, "the guest's virtiofs lines", lambda: _serial(cluster, vmi)[-800:]
    )
    return found


def _check_virtiofs_shares(cluster: Cluster, vmi: dict[str, Any], pod: dict[str, Any]) -> None:
    """virtiofs-cfgfs and virtiofs-datafs run virtiofsd as uid 107; the guest read the
    ConfigMap's key through its tag, could not write there (read-only), and read back what
    it wrote on the claim."""
    lines = _fs_lines(cluster, vmi)
    assert "KUBEVIRT-PY-FS-FILE cfgfs greeting=hello from a configMap" in lines, lines
    assert "KUBEVIRT-PY-FS-WRITE cfgfs failed" in lines, lines
    assert "KUBEVIRT-PY-FS-WRITE datafs read=KVPY-FS-WROTE datafs" in lines, lines
    names = [c["name"] for c in pod["spec"]["containers"]]
    assert {"virtiofs-cfgfs", "virtiofs-datafs"} <= set(names), names
    pids = _virtiofsd_pids()
    assert len(pids) >= 2 and all(_ids(p)[0] == [107] * 4 for p in pids), pids


def _virtiofsd_pids() -> list[int]:
    """virtiofsd processes on this host (every real node's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv0 = (entry / "cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if argv0 == b"/usr/libexec/virtiofsd":
                found.append(int(entry.name))
    return found
