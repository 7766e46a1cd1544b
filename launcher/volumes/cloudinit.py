"""cloudInitNoCloud: a NoCloud ISO (volume label cidata) on a cdrom, rebuilt each start.

User and network data come inline, as base64, or from a Secret the pod mounted at
`PRIVATE_DIR/secret/<volume>-udata` (`-ndata`): its key userdata or userData (networkdata
or networkData), as KubeVirt reads them; sshPublicKey access credentials propagated by
noCloud join the user data's ssh_authorized_keys (launcher/accesscreds.py).
cloudInitConfigDrive shares `cloud_init_data` and `access_keys`.
"""

from __future__ import annotations

import base64
from pathlib import Path

from launcher import accesscreds
from launcher.errors import DiskFailure
from launcher.volumes.base import ResolvedDisk, VolumeRequest
from launcher.volumes.iso import build_iso
from shared import podlayout
from shared.model.credentials import Propagation
from shared.model.volumes import CloudInitNoCloudSource, LocalObjectReference

USER_DATA_KEYS = ("userdata", "userData")
NETWORK_DATA_KEYS = ("networkdata", "networkData")


def _decoded(text: str | None, b64: str | None) -> bytes | None:
    if b64 is not None:
        return base64.b64decode(b64)
    return None if text is None else text.encode()


def _from_secret(
    req: VolumeRequest, ref: LocalObjectReference, *, suffix: str, keys: tuple[str, ...]
) -> bytes:
    mount = req.ctx.config_mount_of(podlayout.SECRET_SUBDIR, req.name + suffix)
    where = f"{req.field}: Secret {ref.name!r}"
    if not mount.is_dir():
        raise DiskFailure(f"{where} is not mounted in the pod at {mount}")
    for key in keys:
        path = mount / key
        if path.is_file():
            return path.read_bytes()
    raise DiskFailure(f"{where} has no key {' or '.join(keys)}")


def cloud_init_data(
    req: VolumeRequest, source: CloudInitNoCloudSource
) -> tuple[bytes, bytes | None]:
    """The user data (empty when none) and the network data (None when none)."""
    user = _decoded(source.user_data, source.user_data_base64)
    if source.user_data_secret_ref is not None:
        user = _from_secret(
            req, source.user_data_secret_ref, suffix=podlayout.USER_DATA_SUFFIX, keys=USER_DATA_KEYS
        )
    network = _decoded(source.network_data, source.network_data_base64)
    if source.network_data_secret_ref is not None:
        network = _from_secret(
            req,
            source.network_data_secret_ref,
            suffix=podlayout.NETWORK_DATA_SUFFIX,
            keys=NETWORK_DATA_KEYS,
        )
    return user or b"", network


def access_keys(req: VolumeRequest, method: Propagation) -> tuple[str, ...]:
    """The sshPublicKey access credentials' keys propagated by `method` (noCloud or
    configDrive), read from their mounted Secrets."""
    try:
        creds = req.vmi.spec.access_credentials
        return accesscreds.keys_for(creds, method, req.ctx.access_cred_dir)
    except accesscreds.CredentialError as e:
        raise DiskFailure(f"spec.accessCredentials: {e}") from e


def fresh_dir(path: Path) -> Path:
    """`path` as an empty directory (files of an earlier start removed)."""
    path.mkdir(parents=True, exist_ok=True)
    for child in sorted(path.rglob("*"), reverse=True):
        if child.is_dir() and not child.is_symlink():
            child.rmdir()
        else:
            child.unlink()
    return path


async def resolve(req: VolumeRequest, source: CloudInitNoCloudSource) -> ResolvedDisk:
    ctx, meta_obj = req.ctx, req.vmi.metadata
    user, network = cloud_init_data(req, source)
    user = accesscreds.with_authorized_keys(user, access_keys(req, Propagation.NO_CLOUD))
    data_dir = fresh_dir(ctx.work_dir / f"cloud-init-{req.name}")
    (data_dir / "user-data").write_bytes(user)
    meta = f"instance-id: {meta_obj.uid or meta_obj.name}\n"
    meta += f"local-hostname: {meta_obj.name}\n"
    (data_dir / "meta-data").write_text(meta)
    if network is not None:
        (data_dir / "network-config").write_bytes(network)
    iso = await build_iso(
        ctx.work_dir / f"{req.name}-cloudinit.iso",
        label="cidata",
        root=data_dir,
        what="building the cloud-init ISO",
    )
    return ResolvedDisk(path=iso, format="raw")
