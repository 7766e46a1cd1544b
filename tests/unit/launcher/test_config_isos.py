"""Config volumes and cloud-init as ISO disks (launcher/volumes): the files the kubelet put
in a configMap/secret/downwardAPI/serviceAccount mount (its `..data` symlink layout
followed, its own entries left out) on an ISO labelled cfgdata or the volume's label,
read-only; a config drive labelled config-2 with openstack/latest/*; cloud-init data read
from a mounted Secret. Contents are read back with isoinfo (genisoimage's)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from launcher import volumes
from launcher.disks import DiskContext
from launcher.errors import DiskFailure
from launcher.volumes import config
from shared import podlayout
from tests.unit.launcher.test_volumes import _ctx, _resolve


def _iso_label(iso: Path) -> str:
    out = subprocess.run(["isoinfo", "-d", "-i", str(iso)], check=True, capture_output=True)
    for line in out.stdout.decode().splitlines():
        if line.startswith("Volume id:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(out.stdout)


def _iso_files(iso: Path) -> list[str]:
    out = subprocess.run(["isoinfo", "-R", "-f", "-i", str(iso)], check=True, capture_output=True)
    return sorted(out.stdout.decode().split())


def _iso_read(iso: Path, name: str) -> bytes:
    out = subprocess.run(
        ["isoinfo", "-R", "-i", str(iso), "-x", name], check=True, capture_output=True
    )
    return out.stdout


def _kubelet_volume(ctx: DiskContext, subdir: str, volume: str, files: dict[str, str]) -> Path:
    """A mount as the kubelet's atomic writer lays it out: the files in a timestamped
    directory, `..data` pointing at it, each top-level name a symlink through `..data`."""
    mount = ctx.config_mount_of(subdir, volume)
    stamp = mount / "..2024_01_01_00_00_00.000000001"
    for name, text in files.items():
        path = stamp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (mount / "..data").symlink_to(stamp.name)
    for top in {name.split("/")[0] for name in files}:
        (mount / top).symlink_to(f"..data/{top}")
    return mount


async def test_a_config_map_becomes_a_cfgdata_iso_of_its_keys(tmp_path: Path) -> None:
    """Each key is a file at the ISO's root, the kubelet's `..` entries are not; the label
    is KubeVirt's default cfgdata; the disk is raw and read-only."""
    ctx = _ctx(tmp_path)
    _kubelet_volume(ctx, podlayout.CONFIG_MAP_SUBDIR, "cfg", {"key": "value\n", "other.conf": "x"})
    resolved = await _resolve(ctx, {"name": "cfg", "configMap": {"name": "app-config"}})
    assert (resolved.format, resolved.readonly) == ("raw", True)
    assert _iso_label(resolved.path) == "cfgdata"
    assert _iso_files(resolved.path) == ["/key", "/other.conf"]
    assert _iso_read(resolved.path, "/key") == b"value\n"


async def test_a_secret_iso_takes_the_volume_label(tmp_path: Path) -> None:
    """secret with volumeLabel: that label; its keys as files."""
    ctx = _ctx(tmp_path)
    _kubelet_volume(ctx, podlayout.SECRET_SUBDIR, "sec", {"password": "hunter2"})
    source = {"secretName": "creds", "volumeLabel": "OEMDRV"}
    resolved = await _resolve(ctx, {"name": "sec", "secret": source})
    assert _iso_label(resolved.path) == "OEMDRV"
    assert _iso_read(resolved.path, "/password") == b"hunter2"


async def test_a_service_account_iso_holds_token_ca_and_namespace(tmp_path: Path) -> None:
    """serviceAccount: the projected volume's token, ca.crt and namespace, label cfgdata."""
    ctx = _ctx(tmp_path)
    files = {"token": "eyJ.token", "ca.crt": "-----BEGIN CERTIFICATE-----\n", "namespace": "ns1"}
    _kubelet_volume(ctx, podlayout.SERVICE_ACCOUNT_SUBDIR, "sa", files)
    resolved = await _resolve(ctx, {"name": "sa", "serviceAccount": {"serviceAccountName": "d"}})
    assert _iso_label(resolved.path) == "cfgdata"
    assert _iso_files(resolved.path) == ["/ca.crt", "/namespace", "/token"]
    assert _iso_read(resolved.path, "/namespace") == b"ns1"


async def test_downward_api_nested_paths_keep_their_directories(tmp_path: Path) -> None:
    """downwardAPI items with a directory in their path land in that directory."""
    ctx = _ctx(tmp_path)
    files = {"labels": 'app="web"\n', "meta/name": "vmi-x"}
    _kubelet_volume(ctx, podlayout.DOWNWARD_API_SUBDIR, "dw", files)
    field = {"fieldRef": {"fieldPath": "metadata.labels"}}
    name_field = {"fieldRef": {"fieldPath": "metadata.name"}}
    source = {"fields": [{"path": "labels", **field}, {"path": "meta/name", **name_field}]}
    resolved = await _resolve(ctx, {"name": "dw", "downwardAPI": source})
    assert _iso_files(resolved.path) == ["/labels", "/meta", "/meta/name"]
    assert _iso_read(resolved.path, "/meta/name") == b"vmi-x"


async def test_an_empty_optional_config_map_gives_an_empty_iso(tmp_path: Path) -> None:
    """An optional ConfigMap that does not exist: the kubelet mounts an empty directory,
    the guest gets an empty ISO."""
    ctx = _ctx(tmp_path)
    ctx.config_mount_of(podlayout.CONFIG_MAP_SUBDIR, "cfg").mkdir(parents=True)
    source = {"name": "absent", "optional": True}
    resolved = await _resolve(ctx, {"name": "cfg", "configMap": source})
    assert _iso_files(resolved.path) == []


async def test_an_iso_is_rebuilt_from_what_the_mount_holds_now(tmp_path: Path) -> None:
    """A second start sees the object's current content (the kubelet updates mounts)."""
    ctx = _ctx(tmp_path)
    mount = _kubelet_volume(ctx, podlayout.CONFIG_MAP_SUBDIR, "cfg", {"key": "one"})
    volume = {"name": "cfg", "configMap": {"name": "c"}}
    await _resolve(ctx, volume)
    (mount.resolve() / "key").write_text("two")
    resolved = await _resolve(ctx, volume)
    assert _iso_read(resolved.path, "/key") == b"two"


async def test_a_config_volume_the_pod_did_not_mount_is_named(tmp_path: Path) -> None:
    """No mount: DiskFailure naming the field and where the mount should be."""
    ctx = _ctx(tmp_path)
    with pytest.raises(DiskFailure, match=r"spec\.volumes\[0\]\.secret: the pod has no mount"):
        await _resolve(ctx, {"name": "sec", "secret": {"secretName": "s"}})


def _drive(**source: Any) -> dict[str, Any]:
    return {"name": "drive", "cloudInitConfigDrive": source}


async def test_a_config_drive_is_labelled_config_2_with_openstack_latest(tmp_path: Path) -> None:
    """user_data, meta_data.json (KubeVirt's keys) and network_data.json under
    openstack/latest, label config-2."""
    ctx = _ctx(tmp_path)
    net = '{"links": []}'
    resolved = await _resolve(ctx, _drive(userData="#cloud-config\n", networkData=net))
    assert _iso_label(resolved.path) == "config-2"
    latest = "/openstack/latest"
    assert _iso_files(resolved.path) == [
        "/openstack",
        latest,
        f"{latest}/meta_data.json",
        f"{latest}/network_data.json",
        f"{latest}/user_data",
    ]
    assert _iso_read(resolved.path, f"{latest}/user_data") == b"#cloud-config\n"
    assert _iso_read(resolved.path, f"{latest}/network_data.json") == net.encode()
    meta = json.loads(_iso_read(resolved.path, f"{latest}/meta_data.json"))
    assert meta["hostname"] == meta["local-hostname"] == "tiny"
    assert meta["instance_id"] == "tiny.default"


async def test_cloud_init_data_comes_from_mounted_secrets(tmp_path: Path) -> None:
    """secretRef: key userdata (or userData) of the Secret mounted at secret/<vol>-udata;
    networkDataSecretRef: networkData of secret/<vol>-ndata; NoCloud and config drive."""
    ctx = _ctx(tmp_path)
    for vol in ("ci", "drive"):
        _kubelet_volume(ctx, podlayout.SECRET_SUBDIR, f"{vol}-udata", {"userData": "#from-secret"})
        _kubelet_volume(ctx, podlayout.SECRET_SUBDIR, f"{vol}-ndata", {"networkdata": "net: 1"})
    refs = {"secretRef": {"name": "u"}, "networkDataSecretRef": {"name": "n"}}
    nocloud = await _resolve(ctx, {"name": "ci", "cloudInitNoCloud": refs})
    assert _iso_read(nocloud.path, "/user-data") == b"#from-secret"
    assert _iso_read(nocloud.path, "/network-config") == b"net: 1"
    drive = await _resolve(ctx, _drive(**refs))
    assert _iso_read(drive.path, "/openstack/latest/user_data") == b"#from-secret"


async def test_a_secret_without_the_user_data_key_is_named(tmp_path: Path) -> None:
    """The Secret holds neither userdata nor userData: DiskFailure naming both."""
    ctx = _ctx(tmp_path)
    _kubelet_volume(ctx, podlayout.SECRET_SUBDIR, "ci-udata", {"other": "x"})
    with pytest.raises(DiskFailure, match="Secret 'u' has no key userdata or userData"):
        await _resolve(ctx, {"name": "ci", "cloudInitNoCloud": {"secretRef": {"name": "u"}}})


def test_resolvers_of_config_sources_are_the_config_module() -> None:
    """Every config source type resolves through launcher/volumes/config."""
    for source_type in config.KINDS:
        assert volumes.RESOLVERS[source_type] is config.resolve
