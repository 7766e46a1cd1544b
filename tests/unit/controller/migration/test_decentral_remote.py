"""Decentralized migration with another cluster, in the migration controller: a sending
VMIM whose connectURL cannot be reached fails naming it and leaves the guest alone; a
receiving VMIM follows another cluster's sender through the synchronization desk
(offer → out of WaitingForSync, report → the guest taken over) and lists this
controller's synchronization addresses."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import replace
from pathlib import Path

import pytest

from controller.migration.sync_config import SyncConfig
from controller.migration.sync_server import SyncServer
from shared.kube import VMIMS, VMIS
from shared.labels import MIGRATION_FINALIZER
from shared.model import MigrationState
from shared.wire.sync import Pairing, PairingState, PeerOutcome, Report, SourceHalf
from tests.unit.controller.migration.test_decentral_io import MID, Rig, _vmi
from tests.unit.virt_api.subresources.certs import Pki, gen_certs

ADDRESS = "10.1.0.9:9185"
# The other cluster's sender: the same namespace and name as the receiver is fine there.
THEIRS = SourceHalf(
    migration_id=MID, namespace="b", vmim_name="out", vmi_name="dst", vmi_uid="their-uid",
    source_node="node01", source_pod="virt-launcher-dst-zzzzz",
)  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    pki, _ = gen_certs(tmp_path_factory.mktemp("pki"))
    return pki


def _sync(pki: Pki) -> SyncConfig:
    cert_dir: Path = pki.root / "virt-synchronization-controller-certs"
    return SyncConfig(cert_dir=cert_dir, advertise_host="10.1.0.9", timeout=2.0)


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


async def test_an_unreachable_connect_url_fails_the_sending_vmim_naming_it(pki: Pki) -> None:
    """Nothing answers at connectURL: the sending VMIM stays Synchronizing for the first
    failed dials, then fails with a reason naming connectURL; the source VMI's
    migrationState is never written (the guest keeps running where it is), and the VMIM
    is not held by its finalizer to report to a peer that never answered."""
    url = _dead_url()
    rig = Rig(sync=_sync(pki), connect_url=url)
    for _ in range(2):
        await rig.ctl.sync("a/out")
        assert rig.api.stored(VMIMS, "a/out")["status"]["phase"] == "Synchronizing"
        rig.refresh("a/out")
    await rig.ctl.sync("a/out")
    status = rig.api.stored(VMIMS, "a/out")["status"]
    assert status["phase"] == "Failed"
    reason = status["migrationState"]["failureReason"]
    assert reason.startswith(f"connectURL {url}: synchronization failed 3 times: ")
    src = rig.api.stored(VMIS, "a/src")["status"]
    assert "migrationState" not in src and src["phase"] == "Running"
    # The failure was told once (no peer ever answered): the VMIM is not held for it.
    finalizers = rig.api.stored(VMIMS, "a/out")["metadata"].get("finalizers", [])
    assert MIGRATION_FINALIZER not in finalizers


async def test_a_receiver_follows_another_clusters_sender(pki: Pki) -> None:
    """The receiving VMIM waits until another cluster's sender offered through the desk,
    then renders its target pod (no source node of this cluster to avoid), lists this
    controller's synchronizationAddresses; once its target is published the desk answers
    READY with the target half; the sender's success report completes the receiving
    VMI's migrationState (its handler takes the guest over)."""
    rig = Rig(sync=_sync(pki))
    rig.informers.migrations.store.remove("a/out")  # the sender is in the other cluster
    await rig.ctl.sync("b/in")
    stored = rig.api.stored(VMIMS, "b/in")["status"]
    assert stored["phase"] == "WaitingForSync"
    assert stored["synchronizationAddresses"] == [ADDRESS]
    desk = rig.ctl.decentral.desk
    waiting = desk.answer(THEIRS)
    assert waiting == Pairing(
        state=PairingState.WAITING, reason="receiving side b/dst not ready yet"
    )
    rig.refresh("b/in")
    await rig.ctl.sync("b/in")
    assert rig.api.stored(VMIMS, "b/in")["status"]["phase"] == "Scheduling"
    (pod,) = rig.pods()
    assert "metadata.name" not in str(pod["spec"].get("affinity")), pod["spec"]
    published = {"migrationUid": "uid-in", "targetNode": "node02", "targetPod": "virt-launcher-dst-b",
                 "targetNodeAddress": "10.2.0.7", "targetDirectMigrationNodePorts": {"49152": 0}}  # fmt: skip
    rig.vmi(_vmi("b", "dst", "uid-dst", {"phase": "WaitingForSync", "migrationState": published}))
    ready = desk.answer(THEIRS)
    assert isinstance(ready, Pairing) and ready.state is PairingState.READY
    assert ready.target is not None
    assert (ready.target.target_node_address, dict(ready.target.ports)) == (
        "10.2.0.7",
        {"49152": 0},
    )
    desk.answer(Report(migration_id=MID, outcome=PeerOutcome.SUCCEEDED))
    assert desk.outcome(MID) == (PeerOutcome.SUCCEEDED, "")


async def test_a_remote_senders_failure_fails_the_receiver(pki: Pki) -> None:
    """Another cluster's sender reports a failure: the receiving VMIM fails with its
    reason and its VMI is told (failed, completed) and keeps waiting."""
    rig = Rig(sync=_sync(pki))
    rig.informers.migrations.store.remove("a/out")
    desk = rig.ctl.decentral.desk
    desk.answer(THEIRS)
    desk.answer(Report(migration_id=MID, outcome=PeerOutcome.FAILED, reason="source gone"))
    await rig.ctl.sync("b/in")
    status = rig.api.stored(VMIMS, "b/in")["status"]
    assert status["phase"] == "Failed"
    assert status["migrationState"]["failureReason"] == "the sending side failed: source gone"
    vmi = rig.api.stored(VMIS, "b/dst")["status"]
    assert vmi["phase"] == "WaitingForSync" and vmi["migrationState"]["failed"]


async def test_a_local_connect_url_still_pairs_in_process(pki: Pki) -> None:
    """connectURL naming this controller's own advertised address pairs in process (no
    dial): the sending VMIM waits Synchronizing for the receiving side's target."""
    rig = Rig(sync=_sync(pki), connect_url=ADDRESS)
    await rig.ctl.sync("a/out")
    assert rig.api.stored(VMIMS, "a/out")["status"]["phase"] == "Synchronizing"
    sender = rig.informers.migrations.store.get("a/out")
    assert sender is not None and rig.ctl.decentral.remote_url(sender) is None


@pytest.mark.parametrize(
    ("target", "leaves"),
    [
        pytest.param({"domainName": "dst", "domainNamespace": "b", "migrationUID": "in"}, True, id="other-vmi"),
        pytest.param({"domainName": "src", "domainNamespace": "a", "migrationUID": "in"}, True, id="same-name-elsewhere"),
        pytest.param({"domainName": "src", "domainNamespace": "a"}, False, id="itself"),
        pytest.param(None, False, id="usual-migration"),
    ],
)  # fmt: skip
def test_a_sending_vmi_leaves_for_another_clusters_vmi_of_the_same_name(
    target: dict[str, str] | None, leaves: bool
) -> None:
    """The source VMI's guest goes to another VMI when the target names another VMI or
    another VMIM (another cluster's receiving VMI may have the source's namespace and
    name): the VMI controller then ends the source Succeeded instead of moving it."""
    raw: dict[str, object] = {"migrationUid": "out", "completed": True}
    if target is not None:
        raw["targetState"] = target
    state = MigrationState.from_dict(raw)
    assert state.leaves_vmi("a", "src") is leaves


async def test_two_controllers_pair_over_the_endpoint(pki: Pki) -> None:
    """Cluster A's migration controller (sending VMIM a/out, connectURL = B's endpoint)
    and cluster B's (receiving VMIM b/in, its desk served on a real TLS socket): A's
    offer takes B's receiver out of WaitingForSync; once B's target is published, A's
    next offer hands the source VMI B's target address and ports."""
    b = Rig(sync=_sync(pki))
    b.informers.migrations.store.remove("a/out")
    b.informers.vmis.store.remove("a/src")
    server = SyncServer(
        replace(_sync(pki), host="127.0.0.1", port=0), answer=b.ctl.decentral.desk.answer
    )
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(server.run())
        await asyncio.wait_for(server.bound.wait(), 10)
        a = Rig(sync=_sync(pki), connect_url=f"127.0.0.1:{server.port}")
        a.informers.migrations.store.remove("b/in")
        a.informers.vmis.store.remove("b/dst")
        await b.ctl.sync("b/in")
        assert b.api.stored(VMIMS, "b/in")["status"]["phase"] == "WaitingForSync"
        await a.ctl.sync("a/out")
        assert a.api.stored(VMIMS, "a/out")["status"]["phase"] == "Synchronizing"
        b.refresh("b/in")
        await b.ctl.sync("b/in")
        assert b.api.stored(VMIMS, "b/in")["status"]["phase"] == "Scheduling"
        published = {"migrationUid": "uid-in", "targetNode": "peer01", "targetPod": "virt-launcher-dst-b",
                     "targetNodeAddress": "10.3.0.7", "targetDirectMigrationNodePorts": {"49152": 0}}  # fmt: skip
        b.vmi(_vmi("b", "dst", "uid-dst", {"phase": "WaitingForSync", "migrationState": published}))
        a.refresh("a/out")
        await a.ctl.sync("a/out")
        state = a.api.stored(VMIS, "a/src")["status"]["migrationState"]
        assert (state["targetNode"], state["targetNodeAddress"]) == ("peer01", "10.3.0.7")
        assert state["targetState"]["migrationUID"] == "uid-in"
        assert a.api.stored(VMIMS, "a/out")["status"]["phase"] == "TargetReady"
        task.cancel()
