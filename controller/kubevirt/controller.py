"""The KubeVirt CR controller: applies the CR to the live configuration every controller
reads (shared.clusterconfig.LiveConfig) and writes the CR's status (logic.py decides).

The configuration is applied from the informer's callbacks on every replica (a standby's
virt-api serves admission with the same feature gates); only the leader writes status.
"""

from __future__ import annotations

import dataclasses
from importlib import metadata

import structlog

from controller.deps import Deps
from controller.kubevirt.logic import plan_status
from controller.kubevirt.mignet import sync_handler_networks
from controller.reconcile import Reconciler, refresher
from shared.clusterconfig import LiveConfig, effective
from shared.kube import KUBEVIRTS, Handlers, NotFound, StatusWriter, WorkQueue
from shared.model import now_rfc3339
from shared.model.kubevirt import KubeVirt

log = structlog.get_logger("controller.kubevirt")
NAD_RETRY = 10.0  # seconds between looks for a missing migration network's NAD


def version() -> str:
    """kubevirt-py's version, as status.observedKubeVirtVersion reports it."""
    try:
        return "v" + metadata.version("kubevirt-py")
    except metadata.PackageNotFoundError:
        return "v0.0.0-dev"


class KubeVirtController(Reconciler):
    """Keeps the KubeVirt CR's status (Available, Degraded …) and the live config current."""

    kind = "kubevirt"
    synchronized_on = "kubevirts"

    def __init__(
        self,
        deps: Deps,
        *,
        queue: WorkQueue,
        live: LiveConfig,
        writer: StatusWriter[KubeVirt],
        sync_addresses: tuple[str, ...] = (),
    ) -> None:
        super().__init__(deps, queue)
        self._live = live
        self._writer = writer
        # The leader's synchronization endpoint (decentralized migration): only the leader
        # writes status, so the CR lists the address that answers.
        self._sync_addresses = sync_addresses
        self._version = version()

    def handlers(self) -> Handlers[KubeVirt]:
        """Callbacks for the KubeVirt informer: apply the configuration, then queue."""

        def changed(kv: KubeVirt) -> None:
            self._live.apply(effective(self._informers.kubevirts.store.list()))
            self.enqueue(kv.key)

        return Handlers(
            on_add=changed,
            on_update=lambda old, new: changed(new),
            on_delete=lambda kv: self._live.apply(
                effective(self._informers.kubevirts.store.list())
            ),
        )

    async def sync(self, key: str) -> None:
        kv = self._informers.kubevirts.store.get(key)
        if kv is None or kv.metadata.is_deleting:
            return
        in_force = effective(self._informers.kubevirts.store.list())
        ours = in_force is not None and in_force.key == key
        error = self._live.error if ours else None
        network_problem = None
        if ours:
            network = self._live.current().migration_network
            network_problem = await sync_handler_networks(
                self._client, network, namespace=kv.namespace
            )
        status = plan_status(
            kv,
            error=error,
            version=self._version,
            now=now_rfc3339(self._clock),
            network_problem=network_problem,
        )
        status = dataclasses.replace(status, synchronization_addresses=self._sync_addresses)
        new = dataclasses.replace(kv, status=status)
        try:
            await self._writer.write_status(
                kv, new, refresh=refresher(self._client, KUBEVIRTS, KubeVirt, key)
            )
        except NotFound:
            return
        if network_problem is not None:  # no NAD informer: look again for it
            self.queue.add_after(key, NAD_RETRY)
        if status.conditions != kv.status.conditions:
            degraded = error is not None or network_problem is not None
            log.info("kubevirt_status_written", degraded=degraded)
