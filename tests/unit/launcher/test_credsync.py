"""The guest-agent access-credential sync (launcher/credsync) against a fake agent: each
user's keys reset to the Secrets' set, a user left without keys has them removed, passwords
set base64 (crypted false); a Secret change (its `..data` link) is applied at the next look,
nothing is sent while nothing changed; failures and an absent agent are reported with
KubeVirt's messages and retried; every change of outcome is pushed."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from launcher.credsync import AGENT_OFFLINE, CredentialSync, SyncSources
from shared.model import VirtualMachineInstance
from shared.wire.domain import AccessCredentialStatus
from shared.wire.errors import CommandFailed, ErrorCode
from tests.integration.launcher.harness import tiny_vmi

KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA alice"
KEY_B = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ bob"


class FakeAgent:
    """Records every command; answers guest-ssh-get-authorized-keys from `present`."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.present: dict[str, list[str]] = {}
        self.fail: str | None = None

    async def __call__(self, command: str, arguments: Mapping[str, Any] | None = None) -> Any:
        args = dict(arguments or {})
        if command == self.fail:
            raise CommandFailed(ErrorCode.LIBVIRT, "agent said no")
        self.calls.append((command, args))
        if command == "guest-ssh-get-authorized-keys":
            return {"keys": self.present.get(args["username"], [])}
        return {}


def _vmi() -> VirtualMachineInstance:
    raw = tiny_vmi()
    raw["spec"]["accessCredentials"] = [
        {"sshPublicKey": {"source": {"secret": {"secretName": "keys"}},
                          "propagationMethod": {"qemuGuestAgent": {"users": ["root"]}}}},
        {"userPassword": {"source": {"secret": {"secretName": "pw"}},
                          "propagationMethod": {"qemuGuestAgent": {}}}},
    ]  # fmt: skip
    return VirtualMachineInstance.from_dict(raw)


def _secret(base: Path, name: str, files: dict[str, str], *, stamp: str) -> None:
    """The kubelet's atomic-writer layout; a new `stamp` is an update."""
    mount = base / name
    mount.mkdir(exist_ok=True)
    (mount / stamp).mkdir()
    for key, value in files.items():
        (mount / stamp / key).write_text(value)
        if not (mount / key).is_symlink():
            (mount / key).symlink_to(f"..data/{key}")
    link = mount / "..data"
    if link.is_symlink():
        link.unlink()
    link.symlink_to(stamp)
    for key in [p.name for p in mount.iterdir() if p.is_symlink() and p.name != "..data"]:
        if key not in files:
            (mount / key).unlink()


class Rig:
    def __init__(self, tmp_path: Path, *, connected: bool = True) -> None:
        self.agent = FakeAgent()
        self.connected = connected
        self.pushed = 0
        self.now = 0.0
        sources = SyncSources(
            vmi=_vmi, connected=lambda: self.connected, secret_dir=lambda n: tmp_path / n
        )
        self.sync = CredentialSync(
            self.agent, sources, on_change=self._pushed, clock=lambda: self.now
        )

    def _pushed(self) -> None:
        self.pushed += 1


async def test_keys_reset_and_passwords_set_once_until_the_secret_changes(tmp_path: Path) -> None:
    """First look: keys with reset, the password base64; a second look sends nothing; a
    removed key is gone at the next look (the new full set, reset)."""
    _secret(tmp_path, "keys", {"a": KEY_A, "b": KEY_B}, stamp="..1")
    _secret(tmp_path, "pw", {"root": "hunter2\n"}, stamp="..1")
    rig = Rig(tmp_path)
    await rig.sync.tick()
    encoded = base64.b64encode(b"hunter2").decode()
    assert rig.agent.calls == [
        ("guest-ssh-add-authorized-keys", {"username": "root", "keys": [KEY_A, KEY_B], "reset": True}),
        ("guest-set-user-password", {"username": "root", "password": encoded, "crypted": False}),
    ]  # fmt: skip
    assert rig.sync.result == AccessCredentialStatus(succeeded=True)
    assert rig.pushed == 1
    rig.agent.calls.clear()
    await rig.sync.tick()
    assert rig.agent.calls == []
    _secret(tmp_path, "keys", {"a": KEY_A}, stamp="..2")
    await rig.sync.tick()
    assert rig.agent.calls[0] == (
        "guest-ssh-add-authorized-keys",
        {"username": "root", "keys": [KEY_A], "reset": True},
    )
    assert rig.pushed == 1  # still succeeded: nothing new to report


async def test_the_last_key_removed_removes_what_the_guest_has(tmp_path: Path) -> None:
    """An empty key Secret: the guest's keys for the user are read and removed."""
    _secret(tmp_path, "keys", {}, stamp="..1")
    _secret(tmp_path, "pw", {}, stamp="..1")
    rig = Rig(tmp_path)
    rig.agent.present["root"] = [KEY_A]
    await rig.sync.tick()
    assert rig.agent.calls == [
        ("guest-ssh-get-authorized-keys", {"username": "root"}),
        ("guest-ssh-remove-authorized-keys", {"username": "root", "keys": [KEY_A]}),
    ]


async def test_no_key_file_yet_gets_an_empty_one(tmp_path: Path) -> None:
    """The agent cannot read the user's authorized_keys (none yet): an add with reset and
    no keys makes it empty, and the sync succeeds."""
    _secret(tmp_path, "keys", {}, stamp="..1")
    _secret(tmp_path, "pw", {}, stamp="..1")
    rig = Rig(tmp_path)
    rig.agent.fail = "guest-ssh-get-authorized-keys"
    await rig.sync.tick()
    assert rig.agent.calls == [
        ("guest-ssh-add-authorized-keys", {"username": "root", "keys": [], "reset": True})
    ]
    assert rig.sync.result == AccessCredentialStatus(succeeded=True)


async def test_failures_are_reported_and_retried(tmp_path: Path) -> None:
    """A refused password: False with KubeVirt's message (keys still applied), retried at
    the next look, True once it lands."""
    _secret(tmp_path, "keys", {"a": KEY_A}, stamp="..1")
    _secret(tmp_path, "pw", {"root": "x"}, stamp="..1")
    rig = Rig(tmp_path)
    rig.agent.fail = "guest-set-user-password"
    await rig.sync.tick()
    assert rig.sync.result is not None and not rig.sync.result.succeeded
    assert rig.sync.result.message.startswith("Error encountered setting password for user [root]")
    assert [c for c, _ in rig.agent.calls] == ["guest-ssh-add-authorized-keys"]
    rig.agent.fail = None
    await rig.sync.tick()
    assert rig.sync.result == AccessCredentialStatus(succeeded=True)
    assert rig.pushed == 2


async def test_no_agent_is_reported_offline_and_nothing_sent(tmp_path: Path) -> None:
    """Agent not connected: False "Guest agent is offline"; synced once it connects."""
    _secret(tmp_path, "keys", {"a": KEY_A}, stamp="..1")
    _secret(tmp_path, "pw", {}, stamp="..1")
    rig = Rig(tmp_path, connected=False)
    await rig.sync.tick()
    assert rig.sync.result == AccessCredentialStatus(succeeded=False, message=AGENT_OFFLINE)
    assert rig.agent.calls == []
    rig.connected = True
    await rig.sync.tick()
    assert rig.sync.result == AccessCredentialStatus(succeeded=True)


async def test_a_secret_not_mounted_is_named(tmp_path: Path) -> None:
    """The password Secret missing from the pod: False naming where it should be."""
    _secret(tmp_path, "keys", {"a": KEY_A}, stamp="..1")
    rig = Rig(tmp_path)
    await rig.sync.tick()
    assert rig.sync.result is not None and not rig.sync.result.succeeded
    assert "not mounted at" in rig.sync.result.message and "pw" in rig.sync.result.message


async def test_run_survives_an_unexpected_error(tmp_path: Path) -> None:
    """An error the sync did not expect is reported False and the loop goes on (the
    launcher's TaskGroup is not brought down by it)."""
    _secret(tmp_path, "keys", {"a": KEY_A}, stamp="..1")
    _secret(tmp_path, "pw", {}, stamp="..1")
    rig = Rig(tmp_path)

    async def broken(command: str, arguments: Any = None) -> Any:
        raise RuntimeError("agent channel exploded")

    rig.sync._agent = broken
    reported = asyncio.Event()
    rig.sync._on_change = reported.set
    task = asyncio.create_task(rig.sync.run(poll_seconds=0.01))
    try:
        async with asyncio.timeout(5):
            await reported.wait()
        await asyncio.sleep(0.05)  # a few more looks
        assert not task.done()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    expected = AccessCredentialStatus(succeeded=False, message="agent channel exploded")
    assert rig.sync.result == expected


async def test_a_resync_is_forced_after_five_minutes(tmp_path: Path) -> None:
    """Unchanged Secrets are applied again once RESYNC_SECONDS passed (a guest that lost
    its keys gets them back)."""
    _secret(tmp_path, "keys", {"a": KEY_A}, stamp="..1")
    _secret(tmp_path, "pw", {}, stamp="..1")
    rig = Rig(tmp_path)
    await rig.sync.tick()
    rig.agent.calls.clear()
    rig.now = 301.0
    await rig.sync.tick()
    assert [c for c, _ in rig.agent.calls] == ["guest-ssh-add-authorized-keys"]
