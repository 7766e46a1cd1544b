"""Access credentials as the launcher reads them (launcher/accesscreds): keys and passwords
from the Secrets mounted at secret/<name>-access-cred (the kubelet's `..data` layout
followed); noCloud keys joined to the user data's ssh_authorized_keys, configDrive keys in
meta_data.json's public_keys; a Secret that is not mounted fails the disk, named."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from launcher import accesscreds, volumes
from launcher.errors import DiskFailure
from shared import podlayout
from shared.model.credentials import AccessCredential, Propagation
from tests.unit.launcher.test_config_isos import _iso_read, _kubelet_volume
from tests.unit.launcher.test_volumes import _ctx, _vmi

KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA alice"
KEY_B = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ bob"


def _cred(secret: str, method: dict[str, Any], *, password: bool = False) -> dict[str, Any]:
    kind = "userPassword" if password else "sshPublicKey"
    return {kind: {"source": {"secret": {"secretName": secret}}, "propagationMethod": method}}


def _creds(*raw: dict[str, Any]) -> tuple[AccessCredential, ...]:
    return tuple(AccessCredential.from_dict(r) for r in raw)


def test_keys_and_passwords_read_through_the_kubelet_layout(tmp_path: Path) -> None:
    """Every non-empty line of every key is a key; each key of a password Secret is a user;
    `..data` and the timestamped directory are not read as keys."""
    ctx = _ctx(tmp_path)
    suffix = podlayout.ACCESS_CRED_SUFFIX
    _kubelet_volume(ctx, "secret", f"k{suffix}", {"a": f"{KEY_A}\n\n", "b": f" {KEY_B} \n"})
    _kubelet_volume(ctx, "secret", f"p{suffix}", {"root": "s3cret\n", "empty": " "})
    keys = accesscreds.read_keys(ctx.config_mount_of("secret", f"k{suffix}"))
    assert keys == (KEY_A, KEY_B)
    passwords = accesscreds.read_passwords(ctx.config_mount_of("secret", f"p{suffix}"))
    assert passwords == {"root": "s3cret"}


def test_agent_credentials_give_each_user_the_union_of_its_secrets(tmp_path: Path) -> None:
    """A user listed by two guest-agent credentials gets both Secrets' keys (once each);
    noCloud keys and other users stay apart; passwords by user."""
    dirs = {"k1": [KEY_A], "k2": [KEY_A, KEY_B], "nc": ["ssh-rsa X nocloud"]}
    for name, keys in dirs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "key").write_text("\n".join(keys))
    (tmp_path / "pw").mkdir()
    (tmp_path / "pw" / "guest").write_text("pass")
    creds = _creds(
        _cred("k1", {"qemuGuestAgent": {"users": ["root"]}}),
        _cred("k2", {"qemuGuestAgent": {"users": ["root", "guest"]}}),
        _cred("nc", {"noCloud": {}}),
        _cred("pw", {"qemuGuestAgent": {}}, password=True),
    )
    got = accesscreds.agent_credentials(creds, lambda n: tmp_path / n)
    assert got.keys == {"root": (KEY_A, KEY_B), "guest": (KEY_A, KEY_B)}
    assert got.passwords == {"guest": "pass"}
    assert accesscreds.keys_for(creds, Propagation.NO_CLOUD, lambda n: tmp_path / n) == (
        "ssh-rsa X nocloud",
    )


def test_a_secret_that_is_not_mounted_is_named(tmp_path: Path) -> None:
    """CredentialError naming the directory the Secret should be at."""
    creds = _creds(_cred("gone", {"qemuGuestAgent": {"users": ["root"]}}))
    with pytest.raises(accesscreds.CredentialError, match=r"not mounted at .*gone"):
        accesscreds.agent_credentials(creds, lambda n: tmp_path / n)


@pytest.mark.parametrize(
    ("user_data", "expected"),
    [
        pytest.param(b"", [KEY_A], id="empty"),
        pytest.param(b"#cloud-config\nhostname: h # mine\n", [KEY_A], id="appended"),
        pytest.param(
            b"#cloud-config\nssh_authorized_keys:\n  - " + KEY_B.encode() + b"\n",
            [KEY_B, KEY_A],
            id="merged",
        ),
    ],
)
def test_no_cloud_keys_join_ssh_authorized_keys(user_data: bytes, expected: list[str]) -> None:
    """The keys end in the document's ssh_authorized_keys, the user's own entries first."""
    out = accesscreds.with_authorized_keys(user_data, (KEY_A,))
    assert out.startswith(b"#cloud-config\n")
    assert yaml.safe_load(out)["ssh_authorized_keys"] == expected
    if b"# mine" in user_data:
        assert out.startswith(user_data)  # the user's text (comments too) kept as it was


def test_a_long_key_stays_on_one_line() -> None:
    """A key longer than YAML's line width is written whole on its line (not folded)."""
    long_key = "ssh-rsa " + "A" * 600 + " someone@somewhere.example"
    for user_data in (b"", b"#cloud-config\nssh_authorized_keys: []\n"):
        out = accesscreds.with_authorized_keys(user_data, (long_key,)).decode()
        assert f"- {long_key}\n" in out


def test_user_data_that_is_not_cloud_config_is_left_alone() -> None:
    """A script stays as it is (cloud-init would not read a list appended to it)."""
    script = b"#!/bin/sh\necho hi\n"
    assert accesscreds.with_authorized_keys(script, (KEY_A,)) == script


async def test_no_cloud_and_config_drive_isos_carry_the_keys(tmp_path: Path) -> None:
    """A noCloud credential's keys in the NoCloud ISO's user-data; a configDrive one's in
    meta_data.json public_keys {"0": key}."""
    ctx = _ctx(tmp_path)
    suffix = podlayout.ACCESS_CRED_SUFFIX
    _kubelet_volume(ctx, "secret", f"nc{suffix}", {"key": KEY_A})
    _kubelet_volume(ctx, "secret", f"cd{suffix}", {"key": KEY_B})
    ci = {"name": "ci", "cloudInitNoCloud": {"userData": "#cloud-config\n"}}
    drive = {"name": "drive", "cloudInitConfigDrive": {"userData": "#cloud-config\n"}}
    vmi = _vmi(ci, drive)
    creds = _creds(_cred("nc", {"noCloud": {}}), _cred("cd", {"configDrive": {}}))
    vmi = dataclasses.replace(vmi, spec=dataclasses.replace(vmi.spec, access_credentials=creds))
    resolved = []
    for i, vol in enumerate(vmi.spec.volumes):
        req = volumes.VolumeRequest(vmi=vmi, name=vol.name or "", ctx=ctx, field=f"v[{i}]")
        resolved.append(await volumes.resolve(req, vol.source()))
    user = yaml.safe_load(_iso_read(resolved[0].path, "/user-data"))
    assert user["ssh_authorized_keys"] == [KEY_A]
    meta = json.loads(_iso_read(resolved[1].path, "/openstack/latest/meta_data.json"))
    assert meta["public_keys"] == {"0": KEY_B}


async def test_a_no_cloud_credential_secret_not_mounted_fails_the_disk(tmp_path: Path) -> None:
    """DiskFailure naming spec.accessCredentials and where the Secret should be."""
    ctx = _ctx(tmp_path)
    vmi = _vmi({"name": "ci", "cloudInitNoCloud": {"userData": "#cloud-config\n"}})
    creds = _creds(_cred("missing", {"noCloud": {}}))
    vmi = dataclasses.replace(vmi, spec=dataclasses.replace(vmi.spec, access_credentials=creds))
    req = volumes.VolumeRequest(vmi=vmi, name="ci", ctx=ctx, field="spec.volumes[0]")
    with pytest.raises(DiskFailure, match=r"spec\.accessCredentials: the Secret is not mounted"):
        await volumes.resolve(req, vmi.spec.volumes[0].source())
