"""The target side of a live migration: prepare the target launcher, then take the VMI over.

The handler's VMI informer selects on `kubevirt.io/nodeName`, which names the source node
until the migration ends, so the target learns of its migrations from the VMIMs (the
controller mirrors the VMI's migrationState into each VMIM's status, so every change of
the VMI's migrationState reaches the VMIM watch too) and reads the VMI itself (a GET).

Per migration whose migrationState names this node as the target:
  1. once the target pod's `launcher-sock` exists: `prepare_migration_target` with the
     VMI, then write migrationState.targetNodeAddress (the controller → TargetReady, and
     the source handler starts the migration);
  2. once the source reported `completed` and the target launcher's domain runs: write
     targetNodeDomainDetected, targetNodeDomainReadyTimestamp and status.nodeName = this
     node. The controller then moves the node label and activePods, and this node's VMI
     informer picks the VMI up like any other.
A decentralized migration (docs/migration.md) has two VMIMs: this side works the
receiving one (`spec.receive`), whose VMI (the receiving VMI, its launcher the target pod)
is prepared and taken over as above; the sending one names the same target node in its
mirrored state but is the source handler's.
A failure to prepare is written as failed=true with the reason (the controller fails the
VMIM and deletes the target pod; the guest never left the source).

With the migration proxy configured (handler certificates mounted), step 1 also opens the
proxy's TLS ports (handler.migration_proxy) and publishes this handler's address and the
ports instead of the launcher's local address; the ports close once the migration is no
longer ours to work (taken over, failed, aborted, its VMIM gone).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import structlog

from handler.errors import SyncError
from handler.launchers import launcher_socket, pod_on_node
from handler.migration_proxy import (
    LIBVIRT_SOCKET,
    SOCKET_NAMES,
    Stream,
    TargetProxy,
    encode_ports,
    migration_dir,
    on_node,
    private_volume,
)
from handler.migration_tls import ProxyConfig
from handler.podnet import PodNetworks
from shared.kube import Informer, KubeError, StatusWriter, WorkQueue
from shared.kube.syncfailure import SyncFailures
from shared.launcherpod import LAUNCHER_GID
from shared.model import (
    Clock,
    MigrationPhase,
    MigrationState,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    format_time,
)
from shared.wire.client import RpcClient
from shared.wire.domain import DomainState, DomainStatus
from shared.wire.errors import WireError
from shared.wire.launcher_api import TIERS, Method, SyncArgs
from shared.wire.migration import PrepareTargetResult

log = structlog.get_logger("handler.migration_target")

GetVMI = Callable[[str, str], Awaitable[VirtualMachineInstance]]
Refresh = Callable[[], Awaitable[VirtualMachineInstance]]
RETRY = 0.5


async def launcher_call(socket: Path, method: Method, args: Mapping[str, Any] | None = None) -> Any:
    """One call on a short-lived connection (the pool serves this node's own VMIs)."""
    async with RpcClient.connect(socket) as client:
        return await client.call(str(method), args or {}, tier=TIERS[method])


class MigrationTargets:
    """Works the VMIMs whose migration lands on this node."""

    def __init__(
        self,
        *,
        node: str,
        pods_dir: Path,
        informer: Informer[VirtualMachineInstanceMigration],
        queue: WorkQueue,
        get_vmi: GetVMI,
        writer: StatusWriter[VirtualMachineInstance],
        wall: Clock,
        proxy: ProxyConfig | None = None,
        podnet: PodNetworks | None = None,
    ) -> None:
        self._proxy = proxy
        self._podnet = podnet
        self._proxies: dict[str, tuple[TargetProxy, Path]] = {}
        self._node = node
        self._pods_dir = pods_dir
        self._informer = informer
        self._queue = queue
        self._get_vmi = get_vmi
        self._writer = writer
        self._wall = wall
        # VMIM status is the controller's: an unexpected error is logged (once), not written
        self._failures = SyncFailures(None, None)

    async def process(self, key: str) -> None:
        """Work one VMIM; failures are logged and retried with the key's backoff."""
        with structlog.contextvars.bound_contextvars(vmim=key):
            try:
                again = await self._reconcile(key)
            except (KubeError, WireError) as exc:
                log.warning("migration_target_failed", error=str(exc))
                self._queue.add_rate_limited(key)
                return
            except Exception as exc:  # task boundary: the traceback once per distinct error
                await self._failures.failed(key, exc)
                self._queue.add_rate_limited(key)
                return
            await self._failures.succeeded(key)
            self._queue.forget(key)
            if again:
                self._queue.add_after(key, RETRY)

    async def _reconcile(self, key: str) -> bool:
        """True when the VMIM must be looked at again soon (waiting for a file or a state)."""
        found = await self._ours(key)
        if found is None:
            await self.close(key)
            return False
        vmi, state = found
        pod_uid = pod_on_node(vmi.status.active_pods, self._node)
        socket = launcher_socket(self._pods_dir, pod_uid) if pod_uid else None
        if pod_uid is None or socket is None or not socket.exists():
            return True
        if not state.target_node_address:
            await self._prepare(key, vmi, state, pod_uid=pod_uid, socket=socket)
            return False
        if state.completed:
            again = await self._take_over(vmi, state, socket)
            if not again:
                await self.close(key)
            return again
        return False

    async def close(self, key: str) -> None:
        """Tear down the proxy of VMIM `key`, if this handler opened one."""
        opened = self._proxies.pop(key, None)
        if opened is not None:
            proxy, directory = opened
            await proxy.close()
            shutil.rmtree(directory, ignore_errors=True)

    async def close_all(self) -> None:
        for key in list(self._proxies):
            await self.close(key)

    async def _open_proxy(
        self, key: str, state: MigrationState, result: PrepareTargetResult, pod_uid: str
    ) -> MigrationState:
        """Open the proxy's ports; the migrationState that publishes them."""
        assert self._proxy is not None and state.migration_uid
        await self.close(key)  # a retried prepare
        in_pod = migration_dir(state.migration_uid)
        directory = on_node(self._pods_dir, pod_uid, in_pod)
        sockets = {s: directory / name for s, name in SOCKET_NAMES.items()}
        sockets[Stream.LIBVIRT] = private_volume(self._pods_dir, pod_uid) / LIBVIRT_SOCKET
        # The destination QEMU binds the memory and NBD sockets here (as the launcher's
        # group when it is not root).
        mig_dir = sockets[Stream.MEMORY].parent
        mig_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
        os.chown(mig_dir, -1, LAUNCHER_GID)
        mig_dir.chmod(0o770)
        proxy = TargetProxy(
            self._proxy,
            migration_uid=state.migration_uid,
            sockets=sockets,
            domain_xml=result.domain_xml,
        )
        self._proxies[key] = (proxy, directory)
        ports = await proxy.open()
        return dataclasses.replace(
            state,
            target_node_address=self._proxy.advertise_host,
            target_direct_migration_node_ports=encode_ports(ports),
        )

    async def _ours(self, key: str) -> tuple[VirtualMachineInstance, MigrationState] | None:
        """The VMI and its migrationState when an unfinished migration lands here."""
        m = self._informer.store.get(key)
        if m is None or m.status.phase_or_unset == MigrationPhase.FAILED:
            return None
        if m.spec.send_to is not None:  # decentralized: its target is the receiving VMIM's
            return None
        mirrored = m.status.migration_state
        if mirrored is None or mirrored.target_node != self._node:
            return None
        namespace, _, name = m.vmi_key.partition("/")
        vmi = await self._get_vmi(namespace, name)
        state = vmi.status.migration_state
        if state is None or state.migration_uid != m.uid or state.target_node != self._node:
            return None
        if state.failed or state.abort_requested or vmi.status.node_name == self._node:
            return None
        return vmi, state

    async def _prepare(
        self,
        key: str,
        vmi: VirtualMachineInstance,
        state: MigrationState,
        *,
        pod_uid: str,
        socket: Path,
    ) -> None:
        args = SyncArgs(vmi=vmi.to_dict()).to_wire()
        try:
            if self._podnet is not None:  # the target pod wired as the source's was
                await self._podnet.ensure(vmi, pod_uid=pod_uid, socket=socket)
        except SyncError as exc:
            await self._record_prepare_failure(vmi, state, f"wiring the target pod: {exc}")
            return
        try:
            raw = await launcher_call(socket, Method.PREPARE_MIGRATION_TARGET, args)
            result = PrepareTargetResult.from_wire(raw)
        except WireError as exc:
            log.warning("migration_target_prepare_failed", error=str(exc))
            await self._record_prepare_failure(vmi, state, f"preparing the target failed: {exc}")
            return
        if self._proxy is not None:
            published = await self._open_proxy(key, state, result, pod_uid)
        else:  # both launchers on one host: the launcher's own address serves
            published = dataclasses.replace(state, target_node_address=result.address)
        log.info(
            "migration_target_prepared",
            address=published.target_node_address,
            ports=dict(published.target_direct_migration_node_ports),
        )
        await self._write(vmi, published)

    async def _take_over(
        self, vmi: VirtualMachineInstance, state: MigrationState, socket: Path
    ) -> bool:
        status = DomainStatus.from_wire(await launcher_call(socket, Method.GET_DOMAIN))
        if status.state is not DomainState.RUNNING:
            return True
        now = format_time(self._wall())
        state = dataclasses.replace(
            state, target_node_domain_detected=True, target_node_domain_ready_timestamp=now
        )
        new = dataclasses.replace(
            vmi, status=dataclasses.replace(vmi.status, node_name=self._node, migration_state=state)
        )
        await self._writer.write_status(vmi, new, refresh=self._refresh(vmi))
        log.info("migration_target_took_over", vmi=vmi.key)
        return False

    async def _record_prepare_failure(
        self, vmi: VirtualMachineInstance, state: MigrationState, reason: str
    ) -> None:
        """Fail the migration, unless it was cancelled or settled meanwhile: a cancelled
        migration's target pod goes away under a running prepare, and the abort the source
        side recorded must not be overwritten by this (stale) failure."""
        fresh = await self._get_vmi(vmi.namespace, vmi.name)
        current = fresh.status.migration_state
        if current is None or current.migration_uid != state.migration_uid:
            return
        if current.failed or current.completed or current.abort_requested:
            log.info("migration_target_prepare_failure_superseded", failed=current.failed)
            return
        now = format_time(self._wall())
        failed = dataclasses.replace(current, failed=True, failure_reason=reason, end_timestamp=now)
        await self._write(fresh, failed)

    async def _write(self, vmi: VirtualMachineInstance, state: MigrationState) -> None:
        status = dataclasses.replace(vmi.status, migration_state=state)
        new = dataclasses.replace(vmi, status=status)
        await self._writer.write_status(vmi, new, refresh=self._refresh(vmi))

    def _refresh(self, vmi: VirtualMachineInstance) -> Refresh:
        async def refresh() -> VirtualMachineInstance:
            return await self._get_vmi(vmi.namespace, vmi.name)

        return refresh
