"""Access credentials propagated by the guest agent, kept in step with their Secrets while
the guest runs (KubeVirt's launcher does the same with its access-credential manager).

The kubelet refreshes a mounted Secret's files in place; `run()` (a task of the
launcher's TaskGroup) polls their `..data` links cheaply and, when they changed, after a
failure, or every RESYNC_SECONDS anyway, applies them through qemu-ga:
- each listed user's authorized keys become exactly the Secrets' keys
  (guest-ssh-add-authorized-keys with reset; guest-ssh-remove-authorized-keys of what is
  there when no key is left);
- each user of a userPassword Secret gets its password (guest-set-user-password,
  crypted false, base64 as the agent wants it).
The outcome is the VMI's AccessCredentialsSynchronized condition: `result` goes with the
domain status to the handler, and `on_change` pushes it when it changes.
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import structlog

from launcher.accesscreds import CredentialError, SecretDir, agent_credentials
from shared.model import VirtualMachineInstance
from shared.model.credentials import Propagation
from shared.wire.domain import AccessCredentialStatus
from shared.wire.errors import CommandFailed

log = structlog.get_logger("launcher.credsync")

POLL_SECONDS = 2.0
RESYNC_SECONDS = 300.0  # KubeVirt's forced resync
SYNC_TIMEOUT_SECONDS = 60.0
AGENT_OFFLINE = "Guest agent is offline"


class AgentPort(Protocol):
    """The guest agent of the domain (launcher.manager.DomainManager.agent)."""

    async def __call__(self, command: str, arguments: Mapping[str, Any] | None = None) -> Any: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncSources:
    """Where the sync looks: the VMI (None until the domain is started), whether the agent
    is connected, and where each Secret is mounted."""

    vmi: Callable[[], VirtualMachineInstance | None]
    connected: Callable[[], bool]
    secret_dir: SecretDir


def _agent_secrets(vmi: VirtualMachineInstance) -> tuple[str, ...]:
    creds = vmi.spec.access_credentials
    names = (c.secret_name for c in creds if c.propagation == Propagation.QEMU_GUEST_AGENT)
    return tuple(dict.fromkeys(n for n in names if n))


def _fingerprint(dirs: list[Path]) -> tuple[str, ...]:
    """What the kubelet's atomic writer changes on every update (its `..data` link), or
    the files' times where there is none."""
    out = []
    for d in dirs:
        try:
            out.append(os.readlink(d / "..data"))
        except OSError:
            try:
                out.append(
                    ",".join(f"{p.name}:{p.stat().st_mtime_ns}" for p in sorted(d.iterdir()))
                )
            except OSError:
                out.append("")
    return tuple(out)


class CredentialSync:
    """Applies the guest-agent access credentials; `result` is the last outcome."""

    def __init__(
        self,
        agent: AgentPort,
        sources: SyncSources,
        *,
        on_change: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._agent = agent
        self._sources = sources
        self._on_change = on_change
        self._clock = clock
        self.result: AccessCredentialStatus | None = None
        self._applied: tuple[str, ...] | None = None
        self._next_resync = 0.0

    async def run(self, *, poll_seconds: float = POLL_SECONDS) -> None:
        """Forever: sync whenever due."""
        while True:
            await asyncio.sleep(poll_seconds)
            try:
                await self.tick()
            except TimeoutError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                self._report(False, "timed out applying the credentials through the guest agent")
            except Exception as e:  # task boundary: the guest runs on; the next look retries
                log.exception("access_credentials_sync_failed")
                self._report(False, str(e))

    async def tick(self) -> None:
        """One look: sync if the Secrets changed, the last sync failed or a resync is due."""
        vmi = self._sources.vmi()
        secrets = _agent_secrets(vmi) if vmi is not None else ()
        if vmi is None or not secrets:
            return
        fingerprint = _fingerprint([self._sources.secret_dir(s) for s in secrets])
        failed = self.result is not None and not self.result.succeeded
        if fingerprint == self._applied and not failed and self._clock() < self._next_resync:
            return
        if not self._sources.connected():
            self._report(False, AGENT_OFFLINE)
            return
        async with asyncio.timeout(SYNC_TIMEOUT_SECONDS):
            message = await self.sync(vmi)
        self._report(message is None, message or "")
        if message is None:
            self._applied = fingerprint
            self._next_resync = self._clock() + RESYNC_SECONDS

    async def sync(self, vmi: VirtualMachineInstance) -> str | None:
        """Apply every guest-agent credential of `vmi`; the first failure's message, None
        when all were applied (later ones are still tried)."""
        try:
            wanted = agent_credentials(vmi.spec.access_credentials, self._sources.secret_dir)
        except CredentialError as e:
            return str(e)
        errors = [await self._set_keys(user, keys) for user, keys in wanted.keys.items()]
        errors += [await self._set_password(user, pw) for user, pw in wanted.passwords.items()]
        return next((e for e in errors if e is not None), None)

    async def _set_keys(self, user: str, keys: tuple[str, ...]) -> str | None:
        try:
            if keys:
                args = {"username": user, "keys": list(keys), "reset": True}
                await self._agent("guest-ssh-add-authorized-keys", args)
            else:
                await self._remove_all_keys(user)
        except CommandFailed as e:
            return (
                f"Error encountered writing ssh pub key access credentials for user [{user}]: {e}"
            )
        log.info("authorized_keys_set", user=user, keys=len(keys))
        return None

    async def _remove_all_keys(self, user: str) -> None:
        """No key left: remove what the guest has; an agent that cannot read the file
        (none yet) gets an empty one (add with reset and no keys)."""
        try:
            found = await self._agent("guest-ssh-get-authorized-keys", {"username": user})
        except CommandFailed:
            args = {"username": user, "keys": [], "reset": True}
            await self._agent("guest-ssh-add-authorized-keys", args)
            return
        present = list((found or {}).get("keys", []))
        if present:
            await self._agent(
                "guest-ssh-remove-authorized-keys", {"username": user, "keys": present}
            )

    async def _set_password(self, user: str, password: str) -> str | None:
        encoded = base64.b64encode(password.encode()).decode()
        args = {"username": user, "password": encoded, "crypted": False}
        try:
            await self._agent("guest-set-user-password", args)
        except CommandFailed as e:
            return f"Error encountered setting password for user [{user}]: {e}"
        log.info("user_password_set", user=user)
        return None

    def _report(self, succeeded: bool, message: str) -> None:
        result = AccessCredentialStatus(succeeded=succeeded, message=message)
        if result == self.result:
            return
        self.result = result
        log.info("access_credentials_synchronized", succeeded=succeeded, message=message)
        self._on_change()
