"""Persistent TPM and EFI state on real nodes (one VM): the KubeVirt CR names the
`shared-storage` class as vmStateStorageClass; the VM's claim persistent-state-for-<vm>
is made (RWX) and mounted by the launcher pod.

- EFI: the tiny guest cannot boot under OVMF (its kernel is an ELF vmlinux booted through
  PVH), so what is checked is the NVRAM file: OVMF writes its variables into the file in
  the claim (it leaves the template's content), libvirt's live XML points at it, after a
  stop/start libvirt reuses the very same file (same inode, not copied again from the
  template, not deleted at undefine), and after a live migration the target's domain
  names the same file.
- TPM: with EFI off the guest boots (SeaBIOS, tpm_tis.force=1 as in vmi-tpm.yaml), defines
  an NV index in its TPM and writes a marker into it (raw TPM2 commands on /dev/tpm0 from
  busybox); after a stop/start, a new launcher's swtpm reads the state from the claim and
  the guest reads the marker back; after a live migration to the other node the guest
  reads it again, writes a second marker, and after one more stop/start reads that one
  (the target's state dir became the claim's current one).
- The RWX claim makes the VM LiveMigratable=True; deleting the VM deletes the claim.
"""

from __future__ import annotations

import json
import struct
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_shared_storage import (
    _agent_connected,
    _guest_sh,
    _libvirt,
    _moved,
)
from tests.integration.realnodes.test_storage import _apply, _get, _running
from tests.integration.realnodes.test_story import _virtctl, _wait

pytestmark = pytest.mark.cluster
IMAGE = "registry.local/kubevirt-py/tiny-guest:v1"
VM = "persist"
CLAIM = f"persistent-state-for-{VM}"
OVMF_VARS = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")
NV_INDEX = 0x01500000
PASSWORD_SESSION = bytes.fromhex("400000090000000000")  # TPM_RS_PW, empty nonce and hmac
TPM_RETRY = "80010000000a00000922"


def _command(code: int, handles: list[int], params: bytes) -> str:
    """A TPM2 command with one empty-password session, as printf's \\x escapes."""
    body = b"".join(struct.pack(">I", h) for h in handles)
    body += struct.pack(">I", len(PASSWORD_SESSION)) + PASSWORD_SESSION + params
    raw = struct.pack(">HII", 0x8002, 10 + len(body), code) + body
    return "".join(f"\\x{b:02x}" for b in raw)


# TPM2_NV_DefineSpace (owner auth): index NV_INDEX, SHA-256, owner/auth read+write, 16 bytes
DEFINE = _command(0x12A, [0x40000001], struct.pack(">HHIHIHH", 0, 14, NV_INDEX, 0x000B,
                                                   0x00060006, 0, 16))  # fmt: skip
READ = _command(0x14E, [NV_INDEX, NV_INDEX], struct.pack(">HH", 16, 0))


def _write(marker: bytes) -> str:
    return _command(0x137, [NV_INDEX, NV_INDEX], struct.pack(">H", 16) + marker + b"\0\0")


# One command on /dev/tpm0: written whole, its response read whole, as hex; retried while
# the TPM answers TPM_RC_RETRY.
TPM_SH = f"""tpm() {{
  i=0
  while [ $i -lt 30 ]; do
    printf "$1" > /tmp/tpmcmd
    exec 3<>/dev/tpm0
    dd if=/tmp/tpmcmd bs=4096 2>/dev/null >&3
    r=$(dd bs=4096 count=1 <&3 2>/dev/null | od -An -tx1 -v | tr -d ' \\n')
    exec 3>&-
    [ "$r" = {TPM_RETRY} ] || break
    i=$((i+1)); sleep 0.2
  done
  echo "$r"
}}
"""


def _vm(*, efi: bool) -> dict[str, Any]:
    firmware: dict[str, Any] = {
        "kernelBoot": {
            "kernelArgs": "console=ttyS0 panic=-1 quiet tpm_tis.force=1",
            "container": {
                "image": IMAGE,
                "kernelPath": "/boot/vmlinuz",
                "initrdPath": "/boot/initrd.img",
            },
        }
    }
    if efi:
        firmware["bootloader"] = {"efi": {"persistent": True, "secureBoot": False}}
    spec = {
        "terminationGracePeriodSeconds": 0,
        "domain": {
            "machine": {"type": "pc"},  # as vmi-tpm.yaml: the forced TIS probe
            "firmware": firmware,
            "resources": {"requests": {"memory": "160Mi"}},
            "devices": {"tpm": {"persistent": True}},
        },
    }
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": VM}, "spec": {"runStrategy": "Always",
                                               "template": {"spec": spec}}}  # fmt: skip


def _set_state_class(k: Kubectl, value: str | None) -> None:
    body = {"spec": {"configuration": {"vmStateStorageClass": value}}}
    k("patch", "kv", "kubevirt", "-n", "kubevirt", "--type=merge", "-p", json.dumps(body))


def _apply_when_admitted(k: Kubectl, ns: str, vm: dict[str, Any]) -> None:
    """Apply once admission's informer has seen the CR's class."""

    def applied() -> bool:
        vm["metadata"]["namespace"] = ns
        return bool(k("apply", "-f", "-", stdin=json.dumps(vm), check=False))

    _wait(applied, 60, "the VM admitted with vmStateStorageClass set", interval=2)


def _restart(k: Kubectl, ns: str, running: dict[str, Any]) -> dict[str, Any]:
    """Stop the VM (its VMI gone), start it again; the new Running VMI."""
    k("patch", "vm", VM, "-n", ns, "--type=merge", "-p", '{"spec":{"runStrategy":"Halted"}}')
    _wait(lambda: not _get(k, ns, "vmi", VM), 120, "the VMI gone")
    k("patch", "vm", VM, "-n", ns, "--type=merge", "-p", '{"spec":{"runStrategy":"Always"}}')
    return _running(k, ns, VM, not_uid=running["metadata"]["uid"])


def _claim_dir(k: Kubectl, ns: str) -> Path:
    claim = _get(k, ns, "pvc", CLAIM)
    pv = _get(k, ns, "pv", claim["spec"]["volumeName"])
    return Path(pv["spec"]["local"]["path"])


def _live_xml(cluster: Cluster, vmi: dict[str, Any], domain: str) -> str:
    with _libvirt(cluster, vmi) as uri:
        done = subprocess.run(["virsh", "-c", uri, "dumpxml", domain], capture_output=True,
                              text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _check_efi(k: Kubectl, ns: str, cluster: Cluster, running: dict[str, Any]) -> None:
    """OVMF's variables land in the claim's NVRAM file; a restart reuses that file."""
    domain = f"{ns}_{VM}"
    nvram = _claim_dir(k, ns) / "nvram" / "efi-vars.fd"
    template = OVMF_VARS.read_bytes()
    _wait(lambda: nvram.is_file() and nvram.read_bytes() != template, 120,
          "OVMF wrote its variables into the claim's NVRAM file")  # fmt: skip
    live = _live_xml(cluster, running, domain)
    assert ">/var/run/kubevirt-private/vm-state/nvram/efi-vars.fd</nvram>" in live, live
    inode = nvram.stat().st_ino
    again = _restart(k, ns, running)
    assert nvram.stat().st_ino == inode  # kept at undefine, reused (not copied anew)
    assert nvram.read_bytes() != template
    assert "/vm-state/nvram/efi-vars.fd</nvram>" in _live_xml(cluster, again, domain)
    moved = _migrate(k, ns, cluster, again)
    assert "/vm-state/nvram/efi-vars.fd</nvram>" in _live_xml(cluster, moved, domain)
    assert nvram.stat().st_ino == inode


def _migrate(k: Kubectl, ns: str, cluster: Cluster, vmi: dict[str, Any]) -> dict[str, Any]:
    """Live-migrate the VM (LiveMigratable=True first: its state claim is RWX); the VMI
    on the other node."""

    def migratable() -> bool:
        conds = _get(k, ns, "vmi", VM).get("status", {}).get("conditions", [])
        return any(c["type"] == "LiveMigratable" and c["status"] == "True" for c in conds)

    _wait(migratable, 60, "LiveMigratable=True (the state claim is RWX)")
    source = vmi["status"]["nodeName"]
    done = _virtctl(cluster.kubeconfig, ns, "migrate", VM, "--wait", "--timeout", "240")
    assert done.returncode == 0, done.stderr
    moved = _moved(k, ns, VM, source)
    assert moved["metadata"]["uid"] == vmi["metadata"]["uid"]
    return moved


def _tpm(cluster: Cluster, vmi: dict[str, Any], *commands: str) -> list[str]:
    """Each TPM command's response (hex), run in the guest in one go."""
    script = TPM_SH + "; ".join(f"tpm '{c}'" for c in commands)
    return _guest_sh(cluster, vmi, script).split()


def _marker(response: str) -> bytes:
    """The 16 bytes an NV_Read response carries (after its header and sizes)."""
    return bytes.fromhex(response)[16:32]


def test_persistent_tpm_and_efi_state_survive_restarts(
    real_cluster: Cluster, real_stack: Kubectl, real_namespace: str
) -> None:
    """EFI: the NVRAM file in the claim is written by OVMF, pointed at by libvirt, reused
    after a restart and a live migration; TPM: a marker the guest writes into an NV index
    of its TPM is read back after a restart and after a live migration, and one written on
    the target after the next restart; the claim goes with the VM."""
    k, ns = real_stack, real_namespace
    _set_state_class(k, "shared-storage")
    try:
        _apply_when_admitted(k, ns, _vm(efi=True))
        first = _running(k, ns, VM)
        claim = _get(k, ns, "pvc", CLAIM)
        assert claim["spec"]["accessModes"] == ["ReadWriteMany"], claim
        assert claim["spec"]["storageClassName"] == "shared-storage"
        _check_efi(k, ns, real_cluster, first)
        _apply(k, ns, _vm(efi=False))  # the guest boots under SeaBIOS
        _check_tpm(k, ns, real_cluster, _restart(k, ns, _get(k, ns, "vmi", VM)))
        k("delete", "vm", VM, "-n", ns, "--wait=true", "--timeout=120s")
        _wait(lambda: not _get(k, ns, "pvc", CLAIM), 120, f"{CLAIM} deleted with the VM")
    finally:
        k("delete", "vm", VM, "-n", ns, "--wait=true", "--timeout=120s", check=False)
        _set_state_class(k, None)


def _check_tpm(k: Kubectl, ns: str, cluster: Cluster, booted: dict[str, Any]) -> None:
    """A marker in an NV index survives a restart and a migration; one written on the
    migration target survives the next restart."""
    _agent_connected(k, ns, VM)
    marker = uuid.uuid4().hex[:16].encode()
    define, write, read = _tpm(cluster, booted, DEFINE, _write(marker), READ)
    assert define.startswith("80020000001300000000"), define  # TPM_RC_SUCCESS
    assert write.startswith("80020000001300000000"), write
    assert _marker(read) == marker, read
    assert (_claim_dir(k, ns) / "swtpm" / "tpm2" / "tpm2-00.permall").is_file()

    again = _restart(k, ns, booted)
    _agent_connected(k, ns, VM)
    (read,) = _tpm(cluster, again, READ)
    assert _marker(read) == marker, read

    moved = _migrate(k, ns, cluster, again)
    second = uuid.uuid4().hex[:16].encode()
    read, write = _tpm(cluster, moved, READ, _write(second))
    assert _marker(read) == marker, read
    assert write.startswith("80020000001300000000"), write
    last = _restart(k, ns, moved)
    _agent_connected(k, ns, VM)
    (read,) = _tpm(cluster, last, READ)
    assert _marker(read) == second, read
