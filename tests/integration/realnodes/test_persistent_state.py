"""Persistent TPM and EFI state on real nodes (one VM): the KubeVirt CR names the
`shared-storage` class as vmStateStorageClass; the VM's claim persistent-state-for-<vm>
is made (RWX) and mounted by the launcher pod.

The guest boots under OVMF (the tiny guest's EFI-stub kernel through kernelBoot, secure
boot off) with a persistent TPM, which it finds through ACPI (OVMF's tables). It writes a
marker into an EFI variable (efivarfs) and into an NV index it defines in its TPM (raw
TPM2 commands on /dev/tpm0 from busybox); OVMF's write lands in the claim's NVRAM file,
which libvirt's live XML names. After a stop/start (a new launcher: the same NVRAM file,
same inode; swtpm reads its state from the claim) the guest reads both markers back;
after a live migration to the other node it reads them again and writes a second marker
into a second variable and into the index (the target's write lands in the same file),
and after one more stop/start reads those (the target's swtpm state dir became the
claim's current one). The RWX claim makes the VM LiveMigratable=True; deleting the VM
deletes the claim.
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
from tests.integration.realnodes.test_storage import _get, _running
from tests.integration.realnodes.test_story import _virtctl, _wait

pytestmark = pytest.mark.cluster
IMAGE = "registry.local/kubevirt-py/tiny-guest:v1"
VM = "persist"
CLAIM = f"persistent-state-for-{VM}"
NVRAM = ">/var/run/kubevirt-private/vm-state/nvram/efi-vars.fd</nvram>"
EFI_GUID = "0c6f6f9e-1bd7-4c45-9a61-1d3e0c9d3a55"  # the test's own vendor GUID
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
# efiset NAME MARKER: a new non-volatile variable NAME-EFI_GUID (efivarfs: the attributes,
# NV|BS|RT, then the data, in one write); efiget NAME: its attributes and data, as hex.
# A variable found at mount is immutable there (no chattr in busybox): a new marker goes
# into a new variable.
EFI_SH = f"""efiset() {{
  printf "\\x07\\x00\\x00\\x00$2" > /tmp/efivar
  dd if=/tmp/efivar of=/sys/firmware/efi/efivars/$1-{EFI_GUID} bs=4096 2>/dev/null \\
    && echo set || echo set-failed
}}
efiget() {{
  r=$(od -An -tx1 -v /sys/firmware/efi/efivars/$1-{EFI_GUID} 2>/dev/null | tr -d ' \\n')
  echo "${{r:-missing}}"
}}
"""


def _vm() -> dict[str, Any]:
    firmware = {
        "bootloader": {"efi": {"persistent": True, "secureBoot": False}},
        "kernelBoot": {
            "kernelArgs": "console=ttyS0 panic=-1 quiet",
            "container": {
                "image": IMAGE,
                "kernelPath": "/boot/vmlinuz.efi",  # OVMF starts its EFI stub
                "initrdPath": "/boot/initrd.img",
            },
        },
    }
    spec = {
        "terminationGracePeriodSeconds": 0,
        "domain": {
            "firmware": firmware,
            "resources": {"requests": {"memory": "256Mi"}},
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


def _guest(cluster: Cluster, vmi: dict[str, Any], *commands: str) -> list[str]:
    """Each command's one-word answer (tpm, efiset, efiget), run in the guest in one go."""
    return _guest_sh(cluster, vmi, TPM_SH + EFI_SH + "; ".join(commands)).split()


def _tpm(command: str) -> str:
    return f"tpm '{command}'"


def _efi(marker: bytes) -> str:
    """What efiget answers for a variable holding `marker`."""
    return "07000000" + marker.hex()


def _nvram_in_claim(cluster: Cluster, vmi: dict[str, Any], nvram: Path, marker: bytes) -> None:
    """libvirt's live XML names the claim's NVRAM file, where the guest's variable landed."""
    assert NVRAM in _live_xml(cluster, vmi, f"{vmi['metadata']['namespace']}_{VM}")
    _wait(lambda: marker in nvram.read_bytes(), 30, "the guest's EFI variable in the claim")


def _marker(response: str) -> bytes:
    """The 16 bytes an NV_Read response carries (after its header and sizes)."""
    return bytes.fromhex(response)[16:32]


def test_persistent_tpm_and_efi_state_survive_restarts(
    real_cluster: Cluster, real_stack: Kubectl, real_namespace: str
) -> None:
    """An EFI guest with a persistent TPM: markers it writes into an EFI variable and a
    TPM NV index are read back after a stop/start and after a live migration, and the
    ones written on the target after the next stop/start; the NVRAM file is the claim's
    throughout; the claim goes with the VM."""
    k, ns = real_stack, real_namespace
    _set_state_class(k, "shared-storage")
    try:
        _apply_when_admitted(k, ns, _vm())
        first = _running(k, ns, VM)
        claim = _get(k, ns, "pvc", CLAIM)
        assert claim["spec"]["accessModes"] == ["ReadWriteMany"], claim
        assert claim["spec"]["storageClassName"] == "shared-storage"
        _check_state(k, ns, real_cluster, first)
        k("delete", "vm", VM, "-n", ns, "--wait=true", "--timeout=120s")
        _wait(lambda: not _get(k, ns, "pvc", CLAIM), 120, f"{CLAIM} deleted with the VM")
    finally:
        k("delete", "vm", VM, "-n", ns, "--wait=true", "--timeout=120s", check=False)
        _set_state_class(k, None)


def _check_state(k: Kubectl, ns: str, cluster: Cluster, booted: dict[str, Any]) -> None:
    """Markers in an EFI variable and an NV index survive a restart and a migration;
    ones written on the migration target survive the next restart."""
    nvram = _claim_dir(k, ns) / "nvram" / "efi-vars.fd"
    _agent_connected(k, ns, VM)
    one = uuid.uuid4().hex[:16].encode()
    answers = _guest(cluster, booted, _tpm(DEFINE), _tpm(_write(one)), _tpm(READ),
                     f"efiset KvpyMarker1 {one.decode()}", "efiget KvpyMarker1")  # fmt: skip
    define, write, read, efiset, efiget = answers
    assert define.startswith("80020000001300000000"), define  # TPM_RC_SUCCESS
    assert write.startswith("80020000001300000000"), write
    assert (_marker(read), efiset, efiget) == (one, "set", _efi(one)), answers
    assert (_claim_dir(k, ns) / "swtpm" / "tpm2" / "tpm2-00.permall").is_file()
    _nvram_in_claim(cluster, booted, nvram, one)
    inode = nvram.stat().st_ino

    again = _restart(k, ns, booted)
    _agent_connected(k, ns, VM)
    read, efiget = _guest(cluster, again, _tpm(READ), "efiget KvpyMarker1")
    assert (_marker(read), efiget) == (one, _efi(one)), (read, efiget)
    assert nvram.stat().st_ino == inode  # kept at undefine, reused (not copied anew)

    moved = _migrate(k, ns, cluster, again)
    two = uuid.uuid4().hex[:16].encode()
    answers = _guest(cluster, moved, _tpm(READ), "efiget KvpyMarker1", _tpm(_write(two)),
                     f"efiset KvpyMarker2 {two.decode()}")  # fmt: skip
    read, efiget, write, efiset = answers
    assert (_marker(read), efiget, efiset) == (one, _efi(one), "set"), answers
    assert write.startswith("80020000001300000000"), write
    _nvram_in_claim(cluster, moved, nvram, two)  # the target writes the same file

    last = _restart(k, ns, moved)
    _agent_connected(k, ns, VM)
    read, efi_one, efi_two = _guest(cluster, last, _tpm(READ), "efiget KvpyMarker1",
                                    "efiget KvpyMarker2")  # fmt: skip
    assert (_marker(read), efi_one, efi_two) == (two, _efi(one), _efi(two)), read
    assert nvram.stat().st_ino == inode
