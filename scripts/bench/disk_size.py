"""(l) of bench_handler.py on real nodes: a VM whose containerDisk is 1 GiB against one with
the tiny disk, create -> Running (issue 26: with image volumes nothing is copied per start,
so the image's size must not show; target <= 1.1x).

The 1 GiB image is the test guest's disk.qcow2 (from the local image store, where
scripts/build-guest registered it) padded to 1 GiB: bytes after the qcow2's own clusters,
which QEMU never reads, written (not sparse) so the node's containerd holds a real 1 GiB
file. It is an OCI archive with one uncompressed layer (/disk/disk.qcow2, owned 107:107,
KubeVirt's layout), made once and cached beside scripts/build-images' archives, and imported
into each node's containerd with `ctr images import`, as the node imports those.
Both VMIs boot the kernel from the tiny image (kernelBoot); only the containerDisk differs.
Each round creates one of each, one at a time (the order alternating), after an untimed
warm-up of each that makes every node's first use of the image happen before the timing.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import io
import json
import os
import statistics
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from handler_common import NAMESPACE, Watcher, delete_all, settle, vmi_body

from localkube.cluster import Cluster
from localkube.imagestore import ImageStore, default_root
from localkube.procs import run_cmd
from shared.kube import VMIS, KubeClient

GUEST = "registry.local/kubevirt-py/tiny-guest:v1"
BIG = "registry.local/kubevirt-py/bench-big-disk:v1"
SIZE = 1024**3
TARGET = 1.1
CHUNK = 1024**2
QEMU_UID = 107


def _pad_stream(disk: Path, size: int) -> Iterator[bytes]:
    """The disk's bytes, then a repeating non-zero pattern up to `size` bytes."""
    data = disk.read_bytes()
    yield data
    block = hashlib.sha256(b"kubevirt-py bench pad").digest() * (CHUNK // 32)
    left = size - len(data)
    while left > 0:
        piece = block[: min(CHUNK, left)]
        left -= len(piece)
        yield piece


class _Stream(io.RawIOBase):
    """A read-only file over an iterator of byte strings (what tarfile.addfile reads)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self._cur, self._pos = chunks, b"", 0

    def readable(self) -> bool:
        return True

    def read(self, n: int | None = -1) -> bytes:
        want = -1 if n is None else n
        out = []
        while want != 0:
            if self._pos >= len(self._cur):
                chunk = next(self._chunks, None)
                if chunk is None:
                    break
                self._cur, self._pos = chunk, 0
            left = len(self._cur) - self._pos
            take = left if want < 0 else min(want, left)
            out.append(self._cur[self._pos : self._pos + take])
            self._pos += take
            want = want - take if want > 0 else want
        return b"".join(out)


def _layer(disk: Path, size: int, out: Path) -> tuple[str, int]:
    """The layer tar (/disk/ and /disk/disk.qcow2 of `size` bytes); its sha256 and size."""
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        d = tarfile.TarInfo("disk")
        d.type, d.mode, d.uid, d.gid = tarfile.DIRTYPE, 0o755, QEMU_UID, QEMU_UID
        tar.addfile(d)
        f = tarfile.TarInfo("disk/disk.qcow2")
        f.size, f.mode, f.uid, f.gid = size, 0o444, QEMU_UID, QEMU_UID
        tar.addfile(f, _Stream(_pad_stream(disk, size)))
    digest = hashlib.sha256()
    with out.open("rb") as fh:
        while chunk := fh.read(8 * CHUNK):
            digest.update(chunk)
    return digest.hexdigest(), out.stat().st_size


def _blob(obj: dict[str, Any]) -> tuple[bytes, str]:
    raw = json.dumps(obj, separators=(",", ":")).encode()
    return raw, hashlib.sha256(raw).hexdigest()


def _add(tar: tarfile.TarFile, name: str, raw: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(raw)
    tar.addfile(info, io.BytesIO(raw))


def build_archive(cache: Path, *, size: int = SIZE) -> Path:
    """The padded image's OCI archive (built once per guest disk and size)."""
    disk = ImageStore(default_root(os.environ)).disk(GUEST, None)
    key = hashlib.sha256(f"{disk.read_bytes().hex()} {size} {BIG}".encode()).hexdigest()[:16]
    archive = cache / "oci" / "archives" / f"bench-big-disk-{key}.tar"
    if archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    layer_file = archive.with_suffix(".layer")
    layer_digest, layer_size = _layer(disk, size, layer_file)
    config, config_digest = _blob({
        "architecture": "amd64",
        "os": "linux",
        "config": {},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
    })  # fmt: skip
    manifest, manifest_digest = _blob({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": f"sha256:{config_digest}", "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": f"sha256:{layer_digest}", "size": layer_size}],
    })  # fmt: skip
    index, _ = _blob({
        "schemaVersion": 2,
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": f"sha256:{manifest_digest}", "size": len(manifest),
                       "annotations": {"org.opencontainers.image.ref.name": BIG}}],
    })  # fmt: skip
    tmp = archive.with_suffix(".tmp")
    with tarfile.open(tmp, "w") as tar:
        _add(tar, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        _add(tar, "index.json", index)
        for digest, raw in ((config_digest, config), (manifest_digest, manifest)):
            _add(tar, f"blobs/sha256/{digest}", raw)
        tar.add(layer_file, f"blobs/sha256/{layer_digest}")
    layer_file.unlink()
    tmp.replace(archive)
    return archive


async def import_everywhere(cluster: Cluster, archive: Path) -> None:
    """`ctr images import` into every node's containerd (the k8s.io namespace)."""
    fleet = cluster.fleet()
    for name in cluster.config.nodes:
        node = fleet.node(name)
        ctr = [str(node.inputs.containerd_bin / "ctr"), "--address",
               str(node.layout.containerd_socket), "-n", "k8s.io"]  # fmt: skip
        await run_cmd([*ctr, "images", "import", str(archive)], timeout=600)


def _body(name: str, image: str) -> dict[str, Any]:
    body = copy.deepcopy(vmi_body(name))
    for volume in body["spec"]["volumes"]:
        if "containerDisk" in volume:
            volume["containerDisk"]["image"] = image
    return body


async def _start_one(kube: KubeClient, name: str, image: str, timeout: float) -> float:
    """create -> Running of one VMI with this containerDisk; then it is deleted."""
    watcher = Watcher()
    async with asyncio.TaskGroup() as tg:
        watch = tg.create_task(watcher.run(kube))
        await asyncio.sleep(0.5)
        began = time.monotonic()
        await kube.create(VMIS, _body(name, image), namespace=NAMESPACE)
        await watcher.until(lambda: name in watcher.running, timeout)
        watch.cancel()
    took = watcher.running[name] - began
    await delete_all(kube)
    return took


async def compare(cluster: Cluster, kube: KubeClient, *, rounds: int, timeout: float) -> None:
    """(l): build and import the 1 GiB image, then `rounds` timed pairs; printed."""
    cache = Path(os.environ.get("KUBEVIRT_PY_CACHE", Path.home() / ".cache" / "kubevirt-py"))
    began = time.monotonic()
    archive = await asyncio.to_thread(build_archive, cache)
    await import_everywhere(cluster, archive)
    print(f"(l) containerDisk of 1 GiB vs the tiny one ({archive.stat().st_size / 1024**3:.2f} "
          f"GiB archive built/imported on both nodes in {time.monotonic() - began:.0f} s)")  # fmt: skip
    await delete_all(kube)
    await settle(busy_below=0.25, longest=120)
    images = {"tiny": GUEST, "1 GiB": BIG}
    times: dict[str, list[float]] = {k: [] for k in images}
    try:
        for r in range(rounds + 1):
            order = list(images) if r % 2 == 0 else list(reversed(images))
            for kind in order:
                name = f"disk-{'big' if kind != 'tiny' else 'tiny'}-{r}"
                took = await _start_one(kube, name, images[kind], timeout)
                if r > 0:  # round 0 warms both images up on the nodes
                    times[kind].append(took)
    except TimeoutError:
        print(f"    timed out after {timeout:g} s waiting for Running; {times}")
        return
    tiny, big = (statistics.median(times[k]) for k in images)
    ratio = big / tiny
    ok = "met" if ratio <= TARGET else "MISSED"
    print(f"    create -> Running, median of {rounds}: tiny {tiny:.2f} s, 1 GiB {big:.2f} s "
          f"-> {ratio:.2f}x (target <= {TARGET:g}x: {ok}); each run: "
          + "; ".join(f"{k} " + " ".join(f"{t:.2f}" for t in v) for k, v in times.items()))  # fmt: skip
