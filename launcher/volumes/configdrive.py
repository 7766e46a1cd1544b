"""cloudInitConfigDrive: an OpenStack config drive (volume label config-2) holding
openstack/latest/user_data, meta_data.json and, when given, network_data.json; rebuilt each
start. Data as for NoCloud (inline, base64 or a Secret). meta_data.json carries KubeVirt's
keys: instance_id `<name>.<namespace>`, local-hostname and hostname, uuid, public_keys
for sshPublicKey access credentials propagated by configDrive, and devices for tagged disks
and interfaces (added once the domain is defined: launcher/devtags.py)."""

from __future__ import annotations

import json
from pathlib import Path

from launcher.accesscreds import public_keys
from launcher.volumes.base import ResolvedDisk, VolumeRequest
from launcher.volumes.cloudinit import access_keys, cloud_init_data, fresh_dir
from launcher.volumes.iso import build_iso
from shared.model.credentials import Propagation
from shared.model.volumes import CloudInitConfigDriveSource

LABEL = "config-2"


def meta_data(req: VolumeRequest) -> dict[str, object]:
    """meta_data.json's content (public_keys: the configDrive access credentials' keys)."""
    meta = req.vmi.metadata
    name = meta.name or ""
    out: dict[str, object] = {
        "instance_id": f"{name}.{meta.namespace or ''}",
        "local-hostname": name,
        "hostname": name,
        "uuid": meta.uid or "",
    }
    keys = access_keys(req, Propagation.CONFIG_DRIVE)
    if keys:
        out["public_keys"] = public_keys(keys)
    return out


def _root(work_dir: Path, volume: str) -> Path:
    return work_dir / f"config-drive-{volume}"


def _iso(work_dir: Path, volume: str) -> Path:
    return work_dir / f"{volume}-configdrive.iso"


async def add_devices(work_dir: Path, *, volume: str, devices: list[dict[str, object]]) -> None:
    """meta_data.json with the "devices" list (launcher/devtags.py), and the ISO rebuilt at
    its place (before the domain starts: QEMU opens it then)."""
    meta_path = _root(work_dir, volume) / "openstack" / "latest" / "meta_data.json"
    meta = json.loads(meta_path.read_text())
    meta["devices"] = devices
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    await build_iso(
        _iso(work_dir, volume),
        label=LABEL,
        root=_root(work_dir, volume),
        what="rebuilding the config drive ISO with device tags",
    )


async def resolve(req: VolumeRequest, source: CloudInitConfigDriveSource) -> ResolvedDisk:
    user, network = cloud_init_data(req, source)
    root = fresh_dir(_root(req.ctx.work_dir, req.name))
    latest = root / "openstack" / "latest"
    latest.mkdir(parents=True)
    if user:
        (latest / "user_data").write_bytes(user)
    (latest / "meta_data.json").write_text(json.dumps(meta_data(req), indent=2) + "\n")
    if network is not None:
        (latest / "network_data.json").write_bytes(network)
    iso = await build_iso(
        _iso(req.ctx.work_dir, req.name),
        label=LABEL,
        root=root,
        what="building the config drive ISO",
    )
    return ResolvedDisk(path=iso, format="raw")
