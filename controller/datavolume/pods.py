"""The claim and the worker pod a DataVolume makes (bodies only, no I/O).

The worker runs the launcher image (it has qemu-img and busybox) as `importer`:

    registry  `pullMethod: pod` (CDI's default: also without one): init:
              virt-importer-py pulls the image itself with the secretRef's credentials
              and the certConfigMap's CAs (registrypull.py), its one disk under /disk/
              into the scratch emptyDir; `node`: init: busybox out of
              the launcher image, then the source image itself (pulled by the node's
              runtime) copies that disk; then qemu-img converts it
    http      busybox wget fetches the URL into scratch; then qemu-img converts it
    pvc       the source claim mounted read-only; qemu-img copies its disk.img (sparse)
    blank     qemu-img creates an empty raw disk of the requested size
    upload    `cdi-upload-<dv>`: virt-uploadserver-py (uploadserver/) takes one upload on
              the pod's loopback into scratch, then runs the same script on it (ready once
              listening: the DataVolume shows UploadReady)

The disk lands as `disk.img` on a Filesystem claim (what the launcher opens) or on the
device of a Block claim, raw, grown to the requested size. A source whose virtual size is
larger than that fails with CDI's words ("A larger PVC is required"). Errors go to the
termination message the controller puts on the DataVolume.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from controller.datavolume import registrypull
from shared import podlayout
from shared.model.datavolume import CDI_API_VERSION, DataVolume
from shared.model.datavolume_spec import BLOCK, SourceKind, Target
from shared.naming import fit, label_value
from shared.upload import (
    HEALTH_PATH,
    UPLOAD_COMMAND,
    UPLOAD_CONTAINER,
    UPLOAD_FILE,
    UPLOAD_PORT,
    UPLOAD_TARGET_ANNOTATION,
    upload_pod_name,
)

WORKER_CONTAINER = "importer"
APP_LABEL = "app"
APP = "containerized-data-importer"
DV_LABEL = "cdi.kubevirt.io/dataVolume"
DATA_DIR = "/data"
BLOCK_DEVICE = "/dev/cdi-block-volume"
SOURCE_DIR = "/source"
SCRATCH_DIR = podlayout.CONTAINER_DISKS_DIR  # copy_command's output root
SCRATCH_SUBDIR = "import"
QEMU_IMG = "/usr/bin/qemu-img"
BINARY_COPY = (podlayout.LAUNCHER_BUSYBOX, "cp", podlayout.LAUNCHER_BUSYBOX, podlayout.BUSYBOX)

# $1 mode, $2 destination, $3 size in bytes, $4 source (path or URL). busybox sh.
SCRIPT = r"""
set -u
term=${TERMINATION_LOG:-/dev/termination-log}
fail() { echo "$*" >"$term"; echo "$*" >&2; exit 1; }
# Each step's end as the node's uptime (s): the log and, on success, the termination message.
steps=""
mark() { read -r up _ </proc/uptime; steps="$steps $1=$up"; }
finish() { mark done; echo "importer steps (uptime s):$steps" | busybox tee "$term" >&2; exit 0; }
mark start
mode=$1 dest=$2 size=$3 src=${4:-}
qimg=/usr/bin/qemu-img
cvt() { $qimg convert -f "$fmt" -O raw "$@" 2>&1; }  # to raw: -W, no metadata to order
if [ "$mode" = blank ]; then
  [ -b "$dest" ] && finish
  $qimg create -q -f raw "$dest" "$size" || fail "cannot create a blank disk of $size bytes"
  finish
fi
if [ "$mode" = http ]; then
  out=$(busybox wget -q -O /scratch/disk "$src" 2>&1) || fail "unable to fetch $src: $out"
  src=/scratch/disk
  mark fetched
fi
[ -f "$src" ] || fail "no disk image at $src"
info=$($qimg info --output=json "$src" 2>&1) || fail "not a disk image: $info"
virt=$(echo "$info" | busybox sed -n 's/.*"virtual-size": *\([0-9]*\).*/\1/p' | busybox head -n1)
fmt=$(echo "$info" | busybox sed -n 's/.*"format": *"\([a-z0-9]*\)".*/\1/p' | busybox head -n1)
mark probed
[ -n "$virt" ] || fail "not a disk image: qemu-img reports no virtual size"
case "$fmt" in raw|qcow2) ;; *) fail "not a disk image: format $fmt (raw or qcow2 expected)";; esac
bytes=$(busybox stat -c %s "$src" 2>/dev/null || echo 0)
if [ "$fmt" = raw ] && [ -f "$src" ] && [ $((bytes % 512)) -ne 0 ]; then
  fail "not a disk image: $bytes bytes is not a whole number of 512-byte sectors"
fi
if [ "$virt" -gt "$size" ]; then
  fail "Virtual image size $virt is larger than the reported available storage $size." \
    "A larger PVC is required."
fi
if [ -b "$dest" ]; then
  out=$(cvt -t none -W "$src" "$dest") || fail "qemu-img convert: $out"
  mark converted
else
  # O_DIRECT: the data goes to the disk once instead of dirtying the page cache for the
  # resize's flush to write back; a filesystem without O_DIRECT (tmpfs) takes the cache.
  out=$(cvt -t none -W "$src" "$dest.tmp") ||
    out=$(cvt -W "$src" "$dest.tmp") || fail "qemu-img convert: $out"
  mark converted
  out=$($qimg resize -q -f raw "$dest.tmp" "$size" 2>&1) || fail "qemu-img resize: $out"
  busybox mv "$dest.tmp" "$dest" || fail "cannot rename the imported disk"
fi
finish
"""


def claim_body(dv: DataVolume, want: Target) -> dict[str, Any]:
    """The claim: the DataVolume's name, owned by it (GC removes it with the DataVolume).
    An upload's claim carries CDI's upload-target annotation (KubeVirt's virtctl
    image-upload checks it before uploading into an existing DataVolume)."""
    metadata: dict[str, Any] = {
        "name": dv.name,
        "namespace": dv.namespace,
        "labels": {APP_LABEL: APP, DV_LABEL: label_value(dv.name)},
        "ownerReferences": [owner_ref(dv)],
    }
    if want.kind is SourceKind.UPLOAD:
        metadata["annotations"] = {UPLOAD_TARGET_ANNOTATION: ""}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata,
            "spec": dict(want.claim_spec)}  # fmt: skip


def owner_ref(dv: DataVolume) -> dict[str, Any]:
    return dv.controller_reference(api_version=CDI_API_VERSION).to_dict()


def worker_name(dv: DataVolume) -> str:
    """CDI's importer-<dv>, or cdi-upload-<dv> for an upload (clone workers as importers)."""
    if dv.spec.source is not None and dv.spec.source.upload is not None:
        return upload_pod_name(dv.name)
    return fit(f"importer-{dv.name}")


def worker_pod(dv: DataVolume, want: Target, *, image: str, pull_policy: str) -> dict[str, Any]:
    """The importer pod for `dv`."""
    volumes: list[dict[str, Any]] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": dv.name}},
        {"name": "scratch", "emptyDir": {}},
    ]
    container = _worker_container(dv, want, image=image, pull_policy=pull_policy)
    if want.kind is SourceKind.UPLOAD:
        _serve_upload(container)
    init: list[dict[str, Any]] = []
    if want.kind is SourceKind.REGISTRY:
        init, more = _registry_init(dv, image=image, pull_policy=pull_policy)
        volumes += more
        container["volumeMounts"].append(
            {"name": podlayout.CONTAINER_DISKS_VOLUME, "mountPath": SCRATCH_DIR, "readOnly": True}
        )
    if want.kind is SourceKind.CLONE:
        source = dv.spec.source.pvc if dv.spec.source else None
        claim = {"claimName": source.name if source else "", "readOnly": True}
        volumes.append({"name": "source", "persistentVolumeClaim": claim})
        container["volumeMounts"].append(
            {"name": "source", "mountPath": SOURCE_DIR, "readOnly": True}
        )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": worker_name(dv),
            "namespace": dv.namespace,
            "labels": {APP_LABEL: APP, DV_LABEL: label_value(dv.name)},
            "ownerReferences": [owner_ref(dv)],
        },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "initContainers": init,
            "containers": [container],
            "volumes": volumes,
        },
    }


def _worker_container(
    dv: DataVolume, want: Target, *, image: str, pull_policy: str
) -> dict[str, Any]:
    """The importer container: SCRIPT on the claim's disk.img or device."""
    block = want.volume_mode == BLOCK
    dest = BLOCK_DEVICE if block else f"{DATA_DIR}/{podlayout.PVC_DISK_FILE}"
    container: dict[str, Any] = {
        "name": WORKER_CONTAINER,
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": [podlayout.LAUNCHER_BUSYBOX, "sh", "-c", SCRIPT, "importer"],
        "args": [want.kind.value, dest, str(want.size_bytes), *_source_arg(dv, want)],
        "env": [{"name": "PATH", "value": "/bin:/usr/bin:/sbin:/usr/sbin"}],
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if block:
        container["volumeDevices"] = [{"name": "data", "devicePath": BLOCK_DEVICE}]
    else:
        container["volumeMounts"].append({"name": "data", "mountPath": DATA_DIR})
    return container


def _serve_upload(container: dict[str, Any]) -> None:
    """The importer script behind the upload server, ready once the server answers."""
    container["name"] = UPLOAD_CONTAINER
    del container["env"]  # the image's PATH: the server is a console script of the venv
    script = [*container.pop("command"), *container.pop("args")]
    container["command"] = [UPLOAD_COMMAND, f"--out={UPLOAD_FILE}", f"--port={UPLOAD_PORT}", "--"]
    container["args"] = script
    probe_url = f"http://127.0.0.1:{UPLOAD_PORT}{HEALTH_PATH}"
    wget = [podlayout.LAUNCHER_BUSYBOX, "wget", "-q", "-O", "/dev/null", probe_url]
    container["readinessProbe"] = {"exec": {"command": wget}, "periodSeconds": 1}


def _source_arg(dv: DataVolume, want: Target) -> list[str]:
    source = dv.spec.source
    if source is None:
        return []
    if want.kind is SourceKind.HTTP and source.http is not None:
        return [source.http.url or ""]
    if want.kind is SourceKind.REGISTRY:
        return [f"{SCRATCH_DIR}/{SCRATCH_SUBDIR}/{podlayout.DISK_FILE}"]
    if want.kind is SourceKind.CLONE:
        return [f"{SOURCE_DIR}/{podlayout.PVC_DISK_FILE}"]
    if want.kind is SourceKind.UPLOAD:
        return [UPLOAD_FILE]
    return []


def registry_image(dv: DataVolume) -> str:
    """The image of `docker://image` (a registry source's url)."""
    reg = dv.spec.source.registry if dv.spec.source else None
    return (reg.url or "").removeprefix("docker://") if reg else ""


def _registry_init(
    dv: DataVolume, *, image: str, pull_policy: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The importer's own pull (pullMethod pod, controller/datavolume/registrypull.py);
    else busybox out of the launcher image, then the source image copying its disk."""
    reg = dv.spec.source.registry if dv.spec.source else None
    if reg is not None and reg.pulled_by_importer():
        out = f"{SCRATCH_DIR}/{SCRATCH_SUBDIR}/{podlayout.DISK_FILE}"
        return registrypull.pull_init(
            reg, image=image, pull_policy=pull_policy, source=registry_image(dv), out=out
        )
    binary = {
        "name": podlayout.BINARY_INIT_CONTAINER,
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": list(BINARY_COPY),
        "volumeMounts": [{"name": podlayout.BINARY_VOLUME, "mountPath": podlayout.BINARY_DIR}],
    }
    files = [podlayout.CopyFile(source=None, name=podlayout.DISK_FILE)]
    copy: dict[str, Any] = {
        "name": "source-image",
        "image": registry_image(dv),
        "command": podlayout.copy_command(PurePosixPath(SCRATCH_SUBDIR), files),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [
            {"name": podlayout.BINARY_VOLUME, "mountPath": podlayout.BINARY_DIR, "readOnly": True},
            {"name": podlayout.CONTAINER_DISKS_VOLUME, "mountPath": SCRATCH_DIR},
        ],
    }
    volumes = [
        {"name": podlayout.BINARY_VOLUME, "emptyDir": {}},
        {"name": podlayout.CONTAINER_DISKS_VOLUME, "emptyDir": {}},
    ]
    return [binary, copy], volumes


def pod_is_ours(raw: Mapping[str, Any], dv: DataVolume) -> bool:
    """The pod is controlled by this DataVolume (same UID)."""
    refs = (raw.get("metadata") or {}).get("ownerReferences") or ()
    return any(r.get("uid") == dv.uid and r.get("controller") for r in refs)
