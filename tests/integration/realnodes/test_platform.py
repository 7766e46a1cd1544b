"""The guest platform and the launcher pod fields on real nodes: a secure-boot EFI guest
(OVMF from the launcher image, SMM, q35 chosen by admission) with virtio-rng, an SMBIOS
identity and chassis, and an ACPI SLIC table from a Secret boots, and its launcher pod
carries the VMI's scheduling and DNS fields."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.conftest import pods
from tests.integration.realnodes.test_story import REPO, _serial, _wait

pytestmark = pytest.mark.cluster
UUID = "5d307ca9-b3ef-428c-8861-06e72d69f223"
PRIORITY_CLASS = "kvpy-platform-test"
POD_FIELDS: dict[str, Any] = {
    "priorityClassName": PRIORITY_CLASS,
    "tolerations": [{"key": "kubevirt.io/drain", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {
                        "matchExpressions": [
                            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
                        ]
                    },
                }
            ]
        }
    },
    "hostname": "efi-guest",
    "subdomain": "platform",
    "dnsPolicy": "None",
    "dnsConfig": {"nameservers": ["198.18.0.10"], "searches": ["platform.test"]},
}


def _slic_table() -> bytes:
    """An ACPI table with a valid header (signature SLIC, length, checksum) and a body."""
    body = b"KUBEVIRT-PY-SLIC-BODY"
    header = struct.pack("<4sIBB6s8sI4sI", b"SLIC", 36 + len(body), 1, 0, b"KVPYOE",
                         b"KVPYSLIC", 1, b"KVPY", 1)  # fmt: skip
    table = bytearray(header + body)
    table[9] = (-sum(table)) & 0xFF
    return bytes(table)


def _oem_secret() -> dict[str, Any]:
    data = {"slic.bin": base64.b64encode(_slic_table()).decode()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "oem-tables"},
            "data": data}  # fmt: skip


def _vmi() -> dict[str, Any]:
    vmi: dict[str, Any] = yaml.safe_load(
        (REPO / "examples" / "conformance" / "vmi-secureboot.yaml").read_text()
    )
    vmi["spec"].update(POD_FIELDS)
    domain = vmi["spec"]["domain"]
    domain["devices"] = {"rng": {}}
    domain["firmware"].update(uuid=UUID, serial="SN-REAL-0001")
    domain["chassis"] = {"manufacturer": "Example", "serial": "CH-REAL-0001", "asset": "A7"}
    domain["firmware"]["acpi"] = {"slicNameRef": "oem"}
    vmi["spec"]["volumes"].append({"name": "oem", "secret": {"secretName": "oem-tables"}})
    return vmi


def _qemu_cmdline(marker: str) -> str:
    """The command line of the QEMU (seen from the host) whose arguments hold `marker`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "qemu-system" in cmdline and marker in cmdline:
            return cmdline
    raise AssertionError(f"no QEMU process with {marker!r}")


def test_secure_boot_guest_boots_with_its_pod_fields(
    real_cluster: Cluster, real_stack: Kubectl, real_namespace: str
) -> None:
    """kubectl apply of a secure-boot VMI: admission defaults secureBoot, smm and q35; the
    guest boots under the secure-boot OVMF (the kernel says so on the console); the domain
    has rng, the SMBIOS uuid and the chassis (type 3) entries, and the SLIC table from its
    Secret (QEMU's -acpitable; the guest kernel lists it); the launcher pod has every pod field as written (plus the
    tolerations kube-apiserver's DefaultTolerationSeconds adds)."""
    k, ns = real_stack, real_namespace
    k("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": PRIORITY_CLASS}, "value": 1000,
    }))  # fmt: skip
    try:
        k("apply", "-n", ns, "-f", "-", stdin=json.dumps(_oem_secret()))
        k("apply", "-n", ns, "-f", "-", stdin=json.dumps(_vmi()))

        def vmi() -> dict[str, Any]:
            out = k("get", "vmi", "vmi-secureboot", "-n", ns, "-o", "json", check=False)
            return json.loads(out) if out else {}

        domain = vmi()["spec"]["domain"]
        assert domain["machine"]["type"] == "q35"
        assert domain["firmware"]["bootloader"]["efi"]["secureBoot"] is True
        running = _wait(
            lambda: (v := vmi()).get("status", {}).get("phase") == "Running" and v,
            300,
            "secure-boot VMI Running",
            lambda: vmi().get("status"),
        )
        serial = _wait(
            lambda: "KUBEVIRT-PY-GUEST-BOOTED" in (t := _serial(real_cluster, running)) and t,
            240,
            "the guest's boot on its console",
            lambda: _serial(real_cluster, running)[-800:],
        )
        assert "Secure boot enabled" in serial
        (pod,) = pods(k, ns, "kubevirt.io=virt-launcher")
        spec: Any = pod["spec"]
        for key, value in POD_FIELDS.items():
            if key == "tolerations":  # the API server adds its not-ready/unreachable ones
                assert all(t in spec[key] for t in value), spec[key]
            else:
                assert spec[key] == value, key
        assert spec["priority"] == 1000
        cmdline = _qemu_cmdline(f"guest={ns}_vmi-secureboot")
        assert "virtio-rng-pci" in cmdline and f"uuid={UUID}" in cmdline
        assert "type=3,manufacturer=Example,serial=CH-REAL-0001,asset=A7" in cmdline, cmdline
        assert "-acpitable sig=SLIC,file=" in cmdline and "/slic.bin" in cmdline, cmdline
        assert "ACPI: SLIC" in serial, serial[-3000:]
        assert "OVMF_CODE_4M.secboot.fd" in cmdline and "smm=on" in cmdline
    finally:
        k("delete", "vmi", "--all", "-n", ns, "--wait=true", "--timeout=120s", check=False)
        k("delete", "priorityclass", PRIORITY_CLASS, check=False)
