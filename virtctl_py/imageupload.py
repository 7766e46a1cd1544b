"""`image-upload dv|pvc NAME`: KubeVirt's virtctl image-upload, into a kubevirt-py
DataVolume or a bare claim.

    virtctl-py image-upload dv|pvc NAME --size=64Mi --image-path=disk.qcow2
                            [--storage-class=SC] [--access-mode=M] [--volume-mode=block]
                            [--no-create] [--wait-secs=300]

`dv`: creates the DataVolume (`spec.source.upload`), waits for UploadReady, sends the file
to its upload server pod through the API server (pods/portforward: the API server
authenticates and authorizes the upload; CDI's upload proxy and UploadTokenRequest are not
used), then waits for Succeeded. `pvc`: creates the claim with CDI's upload-target
annotation (the controller gives it an upload server: controller/uploadclaim/), waits for
its `storage.pod.ready` annotation, sends the file the same way, then waits for its
`storage.pod.phase` to say Succeeded. A file that is no disk image is answered with the
reason, and the DataVolume (or the claim's annotations) end Failed with it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from shared.kube import DATAVOLUMES, PVCS, AlreadyExists, KubeClient, NotFound
from shared.model.datavolume import CDI_API_VERSION, DataVolume, DataVolumePhase
from shared.upload import (
    POD_PHASE_ANNOTATION,
    POD_READY_ANNOTATION,
    RUNNING_MESSAGE_ANNOTATION,
    UPLOAD_PATH,
    UPLOAD_PORT,
    UPLOAD_TARGET_ANNOTATION,
    upload_pod_name,
)
from virtctl_py.errors import CliError, Exit
from virtctl_py.podforward import forward_pod
from virtctl_py.session import Target
from virtctl_py.wait import wait_until

CHUNK = 1 << 20
CONTENT_TYPE_ANNOTATION = "cdi.kubevirt.io/storage.contentType"
SEND_TIMEOUT = 60.0  # no progress either way for this long: give up
ANSWER_TIMEOUT = 3600.0  # the server converts before it answers


def datavolume_body(args: argparse.Namespace, namespace: str) -> dict[str, Any]:
    """The upload DataVolume the flags describe."""
    storage: dict[str, Any] = {"resources": {"requests": {"storage": args.size}}}
    if args.storage_class:
        storage["storageClassName"] = args.storage_class
    if args.access_mode:
        storage["accessModes"] = [args.access_mode]
    if args.volume_mode:
        storage["volumeMode"] = "Block" if args.volume_mode == "block" else "Filesystem"
    return {
        "apiVersion": CDI_API_VERSION,
        "kind": "DataVolume",
        "metadata": {"name": args.name, "namespace": namespace},
        "spec": {"source": {"upload": {}}, "storage": storage},
    }


def claim_body(args: argparse.Namespace, namespace: str) -> dict[str, Any]:
    """The bare upload claim the flags describe (CDI's annotations, as KubeVirt's virtctl
    makes it)."""
    spec: dict[str, Any] = {
        "accessModes": [args.access_mode or "ReadWriteOnce"],
        "resources": {"requests": {"storage": args.size}},
    }
    if args.storage_class:
        spec["storageClassName"] = args.storage_class
    if args.volume_mode:
        spec["volumeMode"] = "Block" if args.volume_mode == "block" else "Filesystem"
    annotations = {UPLOAD_TARGET_ANNOTATION: "", CONTENT_TYPE_ANNOTATION: "kubevirt"}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": args.name, "namespace": namespace, "annotations": annotations},
        "spec": spec,
    }


async def image_upload(kube: KubeClient, target: Target, args: argparse.Namespace) -> str:
    """The `image-upload` verb."""
    path = Path(args.image_path)
    if not path.is_file():
        raise CliError(f"--image-path {path}: no such file", code=Exit.USAGE)
    if args.kind == "pvc":
        return await _claim_upload(kube, target, args, path)
    ns = target.namespace
    if not args.no_create:
        if not args.size:
            raise CliError("--size is required to create the DataVolume", code=Exit.USAGE)
        try:
            await kube.create(DATAVOLUMES, datavolume_body(args, ns), namespace=ns)
        except AlreadyExists:
            raise CliError(f"DataVolume {ns}/{args.name} already exists (--no-create)") from None
    await _wait_phase(kube, ns, args.name, DataVolumePhase.UPLOAD_READY, timeout=args.wait_secs)
    async with forward_pod(target, pod=upload_pod_name(args.name), port=UPLOAD_PORT) as local:
        await _send(f"http://127.0.0.1:{local}{UPLOAD_PATH}", path)
    await _wait_phase(kube, ns, args.name, DataVolumePhase.SUCCEEDED, timeout=args.wait_secs)
    return f"Uploaded {path} into DataVolume {ns}/{args.name}"


async def _claim_upload(
    kube: KubeClient, target: Target, args: argparse.Namespace, path: Path
) -> str:
    """`image-upload pvc`: the claim, its upload server ready, the file, Succeeded."""
    ns = target.namespace
    if not args.no_create:
        if not args.size:
            raise CliError("--size is required to create the claim", code=Exit.USAGE)
        try:
            await kube.create(PVCS, claim_body(args, ns), namespace=ns)
        except AlreadyExists:
            raise CliError(f"PVC {ns}/{args.name} already exists (--no-create)") from None
    await _wait_claim(kube, ns, args.name, ready=True, timeout=args.wait_secs)
    async with forward_pod(target, pod=upload_pod_name(args.name), port=UPLOAD_PORT) as local:
        await _send(f"http://127.0.0.1:{local}{UPLOAD_PATH}", path)
    await _wait_claim(kube, ns, args.name, ready=False, timeout=args.wait_secs)
    return f"Uploaded {path} into PVC {ns}/{args.name}"


async def _wait_claim(kube: KubeClient, ns: str, name: str, *, ready: bool, timeout: float) -> None:
    """Until the claim's upload server is ready (`ready`), or its upload Succeeded."""

    async def probe() -> tuple[bool, str]:
        try:
            claim = await kube.get(PVCS, name, namespace=ns)
        except NotFound:
            return False, "not found"
        notes = (claim.get("metadata") or {}).get("annotations") or {}
        phase = str(notes.get(POD_PHASE_ANNOTATION) or "no upload pod yet")
        if UPLOAD_TARGET_ANNOTATION not in notes:
            raise CliError(
                f"PVC {ns}/{name} is not an upload target (no {UPLOAD_TARGET_ANNOTATION})"
            )
        if phase == "Failed":
            raise CliError(
                f"PVC {ns}/{name} upload Failed: {notes.get(RUNNING_MESSAGE_ANNOTATION, '')}"
            )
        if ready:
            return notes.get(POD_READY_ANNOTATION) == "true", phase
        return phase == "Succeeded", phase

    what = f"PVC {name} {'upload server ready' if ready else 'upload Succeeded'}"
    await wait_until(probe, what=what, timeout=timeout)


async def _wait_phase(
    kube: KubeClient, ns: str, name: str, phase: DataVolumePhase, *, timeout: float
) -> None:
    async def probe() -> tuple[bool, str]:
        try:
            dv = DataVolume.from_dict(await kube.get(DATAVOLUMES, name, namespace=ns))
        except NotFound:
            return False, "not found"
        failure = dv.failure()
        if failure is not None:
            raise CliError(f"DataVolume {ns}/{name} Failed: {failure}")
        return dv.phase == phase, str(dv.phase or "no phase yet")

    await wait_until(probe, what=f"DataVolume {name} {phase}", timeout=timeout)


async def _send(url: str, path: Path) -> None:
    size = path.stat().st_size
    timeout = aiohttp.ClientTimeout(sock_connect=30, sock_read=ANSWER_TIMEOUT)
    headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(url, data=_chunks(path), headers=headers) as resp,
        ):
            text = (await resp.text()).strip()
    except aiohttp.ClientError as e:
        raise CliError(f"the upload to the upload server failed: {e}") from e
    if resp.status != 200:
        raise CliError(f"the upload server refused the upload ({resp.status}): {text}")
    print(f"sent {size} bytes", file=sys.stderr)


async def _chunks(path: Path) -> AsyncIterator[bytes]:
    with path.open("rb") as f:
        while data := f.read(CHUNK):
            yield data
