"""`image-upload dv NAME`: KubeVirt's virtctl image-upload, into a kubevirt-py DataVolume.

    virtctl-py image-upload dv NAME --size=64Mi --image-path=disk.qcow2
                            [--storage-class=SC] [--access-mode=M] [--volume-mode=block]
                            [--no-create] [--wait-secs=300]

Creates the DataVolume (`spec.source.upload`), waits for UploadReady, sends the file to its
upload server pod through the API server (pods/portforward: the API server authenticates
and authorizes the upload; CDI's upload proxy and UploadTokenRequest are not used), then
waits for Succeeded. A file that is no disk image is answered with the reason, and the
DataVolume ends Failed with it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from shared.kube import DATAVOLUMES, AlreadyExists, KubeClient, NotFound
from shared.model.datavolume import CDI_API_VERSION, DataVolume, DataVolumePhase
from shared.upload import UPLOAD_PATH, UPLOAD_PORT, upload_pod_name
from virtctl_py.errors import CliError, Exit
from virtctl_py.podforward import forward_pod
from virtctl_py.session import Target
from virtctl_py.wait import wait_until

CHUNK = 1 << 20
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


async def image_upload(kube: KubeClient, target: Target, args: argparse.Namespace) -> str:
    """The `image-upload` verb."""
    path = Path(args.image_path)
    if not path.is_file():
        raise CliError(f"--image-path {path}: no such file", code=Exit.USAGE)
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
