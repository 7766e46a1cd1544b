"""Names at the limit on real nodes: in a 63-character namespace, a VM, its disk, its volume
and its claim named with 63 characters each run (one boot); stopped, the VM is snapshotted
and restored into a new 63-character VM under 253-character snapshot and restore names; a
63-character VirtualMachineExport of it reaches Ready and serves a download over TLS (its
certificate's CN was the reported bug); a 63-character VirtualMachinePool makes its
member (`<pool>-<hash>-0`) and a 253-character blank DataVolume is imported by its worker
pod. While the VM runs,
`virtctl-py console` and `port-forward --stdio` end cleanly with any stdin. Every name the
controller derived fits, and its log holds no unexpected sync error for the namespace."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from localkube.deploy import Kubectl
from tests.integration.realnodes.test_csi import _apply, _bound, _claim, _get
from tests.integration.realnodes.test_datavolumes import _guest_spec
from tests.integration.realnodes.test_storage import _running
from tests.integration.realnodes.test_story import REPO, _virtctl, _wait

pytestmark = pytest.mark.cluster
VM_REF = {"apiGroup": "kubevirt.io", "kind": "VirtualMachine"}
SNAP_API = "snapshot.kubevirt.io/v1beta1"


def _long(prefix: str, size: int) -> str:
    """`prefix` padded to `size` characters with a valid tail (a label or a subdomain)."""
    if size <= 63:
        return (prefix + "-" + "x" * 63)[: size - 1] + "z"
    labels = [_long(prefix, 63)] * (size // 64)
    rest = size - 64 * len(labels)
    return ".".join([*labels, _long(prefix, rest)]) if rest else ".".join(labels)


VM = _long("vm", 63)
VOLUME = _long("vol", 63)
CLAIM = _long("claim", 63)
SNAPSHOT = _long("snap", 253)
RESTORE = _long("restore", 253)
COPY = _long("copy", 63)
EXPORT = _long("exp", 63)
POOL = _long("pool", 63)  # admission: pools and replica sets ≤ 63, as VMs
DATAVOLUME = _long("dv", 253)


@pytest.fixture
def long_namespace(real_kubectl: Kubectl) -> Iterator[str]:
    """A namespace of 63 characters, removed (VMs first) at the end."""
    name = _long(f"ln-{uuid.uuid4().hex[:8]}", 63)
    real_kubectl("create", "namespace", name)
    yield name
    for kind in ("vmpool", "vm", "vmi"):
        real_kubectl("delete", kind, "--all", "-n", name, "--wait=true", "--timeout=120s",
                     check=False)  # fmt: skip
    real_kubectl("delete", "namespace", name, "--wait=false", check=False)


def _vm(name: str, claim: str, run: str) -> dict[str, Any]:
    spec = _guest_spec({"persistentVolumeClaim": {"claimName": claim}})
    spec["domain"]["devices"]["disks"][0]["name"] = VOLUME
    spec["volumes"][0]["name"] = VOLUME
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": name},
            "spec": {"runStrategy": run, "template": {"spec": spec}}}  # fmt: skip


def _obj(api: str, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name}, "spec": spec}


def _until(k: Kubectl, ns: str, kind: str, name: str, ok: Any) -> dict[str, Any]:
    found: dict[str, Any] = _wait(
        lambda: (o := _get(k, ns, kind, name)) and ok(o.get("status") or {}) and o,
        180, f"{kind} {name[:20]}…", lambda: _get(k, ns, kind, name).get("status"),
    )  # fmt: skip
    return found


def _names(k: Kubectl, ns: str, kinds: str) -> list[str]:
    out = k("get", kinds, "-n", ns, "-o", "json")
    return [i["metadata"]["name"] for i in json.loads(out)["items"]]


def _boot_then_stop(k: Kubectl, ns: str) -> None:
    """The 63-character VM runs (its launcher pod named from it), then stops."""
    _apply(k, ns, {**_claim(CLAIM, "64Mi"), "spec": {**_claim(CLAIM, "64Mi")["spec"],
                                                     "storageClassName": "csi-local"}})  # fmt: skip
    _bound(k, ns, CLAIM)
    _apply(k, ns, _vm(VM, CLAIM, "Always"))
    vmi = _running(k, ns, VM)
    assert vmi["status"]["phase"] == "Running"
    _console_with_any_stdin(k, ns)
    assert _virtctl(k.kubeconfig, ns, "stop", VM).returncode == 0
    _wait(lambda: not _get(k, ns, "vmi", VM), 120, "the VMI gone")


def _console_with_any_stdin(k: Kubectl, ns: str) -> None:
    """`virtctl-py console` and `port-forward --stdio` with stdin a file, /dev/null, closed
    or a pipe: connected, ended at stdin's end (KubeVirt's virtctl), no traceback."""
    argv = [sys.executable, "-m", "virtctl_py", "--kubeconfig", str(k.kubeconfig), "-n", ns]
    commands = {"console": [*argv, "console", VM],
                "port-forward": [*argv, "port-forward", "--stdio", f"vmi/{VM}", "22"]}  # fmt: skip
    stdins = {"file": "< /etc/hostname", "devnull": "< /dev/null", "closed": "<&-",
              "pipe": "printf 'root\\n' |"}  # fmt: skip
    for what, command in commands.items():
        # port-forward: only stdins that end before the guest could answer (its port may
        # not listen yet, which is an error of its own)
        kinds = stdins if what == "console" else ("devnull", "closed")
        for kind in kinds:
            redirect = stdins[kind]
            line = " ".join(shlex.quote(a) for a in command)
            line = f"{redirect} {line}" if redirect.endswith("|") else f"{line} {redirect}"
            done = subprocess.run(["bash", "-c", line], capture_output=True, text=True,
                                  timeout=120, cwd=REPO, check=False)  # fmt: skip
            assert done.returncode == 0, (what, kind, done.stderr)
            assert "Traceback" not in done.stderr, (what, kind, done.stderr)


def _snapshot_and_restore(k: Kubectl, ns: str) -> None:
    """A 253-character snapshot of the stopped VM and a 253-character restore of it into a
    new 63-character VM (kept Halted): the restored claim's name is cut to 63 characters
    with a hash, and the new VM, which names it, is admitted."""
    _apply(k, ns, _obj(SNAP_API, "VirtualMachineSnapshot", SNAPSHOT,
                       {"source": {**VM_REF, "name": VM}}))  # fmt: skip
    snap = _until(
        k, ns, "vmsnapshot", SNAPSHOT, lambda s: s.get("phase") in ("Succeeded", "Failed")
    )
    assert snap["status"]["phase"] == "Succeeded" and snap["status"]["readyToUse"], snap["status"]
    halted = '{"op": "replace", "path": "/spec/runStrategy", "value": "Halted"}'
    spec = {"target": {**VM_REF, "name": COPY}, "virtualMachineSnapshotName": SNAPSHOT,
            "patches": [halted]}  # fmt: skip
    _apply(k, ns, _obj(SNAP_API, "VirtualMachineRestore", RESTORE, spec))
    done = _until(k, ns, "vmrestore", RESTORE, lambda s: s.get("complete"))
    (restored,) = done["status"]["restores"]
    claim = restored["persistentVolumeClaim"]
    assert len(claim) <= 63, claim
    volumes = _get(k, ns, "vm", COPY)["spec"]["template"]["spec"]["volumes"]
    assert volumes[0]["persistentVolumeClaim"]["claimName"] == claim
    _bound(k, ns, claim)


def _export(k: Kubectl, ns: str, tmp_path: Path) -> None:
    """The 63-character export of the stopped VM reaches Ready; its serving certificate's CN
    fits X.509's 64 characters; virtctl-py downloads the disk through it."""
    spec = {"source": {**VM_REF, "name": VM}}
    _apply(k, ns, _obj("export.kubevirt.io/v1beta1", "VirtualMachineExport", EXPORT, spec))
    vme = _until(k, ns, "vmexport", EXPORT, lambda s: s.get("phase") == "Ready")
    link = vme["status"]["links"]["internal"]
    ca = x509.load_pem_x509_certificate(link["cert"].encode())
    (cn,) = ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    assert len(str(cn.value)) <= 64
    out = tmp_path / "disk.img"
    done = _virtctl(k.kubeconfig, ns, "vmexport", "download", EXPORT, f"--output={out}",
                    "--format=raw")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0
    (service,) = [n for n in _names(k, ns, "services") if n.startswith("virt-export-")]
    assert len(service) <= 63 and service in _names(k, ns, "pods"), service


def _pool_and_datavolume(k: Kubectl, ns: str) -> None:
    """A 63-character pool (admission's limit) makes its member (a VM name ≤ 63 ending in
    its index, labelled with the pool's name); a 253-character blank DataVolume's worker
    imports it."""
    template = {"metadata": {"labels": {"edge": "pool"}},
                "spec": {"runStrategy": "Halted",
                         "template": {"metadata": {"labels": {"edge": "pool"}},
                                      "spec": _vm(VM, CLAIM, "Halted")["spec"]["template"]["spec"]}}}  # fmt: skip
    pool = _obj("pool.kubevirt.io/v1beta1", "VirtualMachinePool", POOL,
                {"replicas": 1, "selector": {"matchLabels": {"edge": "pool"}},
                 "virtualMachineTemplate": template})  # fmt: skip
    _apply(k, ns, pool)

    def member() -> list[str]:
        out = k(
            "get", "vm", "-n", ns, "-l", "edge=pool", "-o", "jsonpath={.items[*].metadata.name}"
        )
        return out.split()

    (name,) = _wait(member, 120, "the pool's member VM", member)
    assert len(name) <= 63 and name.endswith("-0"), name
    labels = _get(k, ns, "vm", name)["metadata"]["labels"]
    assert len(labels["kubevirt.io/vmpool"]) <= 63, labels
    dv = {"source": {"blank": {}}, "storage": {"resources": {"requests": {"storage": "16Mi"}},
                                               "storageClassName": "csi-local"}}  # fmt: skip
    _apply(k, ns, _obj("cdi.kubevirt.io/v1beta1", "DataVolume", DATAVOLUME, dv))
    done = _until(k, ns, "dv", DATAVOLUME, lambda s: s.get("phase") in ("Succeeded", "Failed"))
    assert done["status"]["phase"] == "Succeeded", done["status"]


def test_maximal_names_run_snapshot_restore_export_and_pool(
    real_stack: Kubectl, long_namespace: str, tmp_path: Path
) -> None:
    """Maximal names through the main families on real nodes, with one boot; no controller
    replica logged an unexpected sync error (or a work-item traceback) for the namespace."""
    k, ns = real_stack, long_namespace
    _boot_then_stop(k, ns)
    _snapshot_and_restore(k, ns)
    _export(k, ns, tmp_path)
    _pool_and_datavolume(k, ns)
    logs = k("logs", "-n", "kubevirt", "-l", "kubevirt.io=virt-controller", "--tail=-1",
             "--prefix", check=False)  # fmt: skip
    unexpected = ("work_item_failed", "sync_unexpected_error")
    failed = [ln for ln in logs.splitlines() if ns in ln and any(u in ln for u in unexpected)]
    assert not failed, failed[:3]
