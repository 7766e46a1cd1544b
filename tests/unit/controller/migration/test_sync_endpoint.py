"""The synchronization endpoint over a real local TLS socket (certificates from
scripts/gen-certs): the sending side's RemotePeer gets the receiving desk's pairing,
reports reach the desk, a bad frame is answered with a failure naming the field, a peer
without the synchronization certificate is refused, and an endpoint that cannot be reached
fails the pairing after the configured attempts, naming the connectURL."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from controller.migration.decentral_remote import RemoteSending, SyncDesk
from controller.migration.sync_client import RemotePeer, SyncRefused, SyncUnreachable, exchange
from controller.migration.sync_config import SyncConfig
from controller.migration.sync_server import SyncServer
from shared.model import VirtualMachineInstanceMigration
from shared.wire.framing import HEADER, encode_frame, read_frame
from shared.wire.sync import (
    SYNC_CN,
    Pairing,
    PairingState,
    PeerOutcome,
    Report,
    SourceHalf,
)
from tests.unit.virt_api.subresources.certs import Pki, gen_certs

SOURCE = SourceHalf(
    migration_id="mig-1", namespace="a", vmim_name="out", vmi_name="src", vmi_uid="u1",
    source_node="node01", source_pod="virt-launcher-src-x",
)  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    pki, _ = gen_certs(tmp_path_factory.mktemp("pki"))
    return pki


def _config(cert_dir: Path, *, port: int = 0) -> SyncConfig:
    return SyncConfig(cert_dir=cert_dir, host="127.0.0.1", port=port, timeout=5.0)


@dataclass
class Served:
    url: str
    config: SyncConfig  # a client's: the synchronization certificate
    woken: list[str]
    desk: SyncDesk


@pytest.fixture
async def served(pki: Pki) -> AsyncIterator[Served]:
    """A desk with no receiving VMIM, served on an ephemeral port of 127.0.0.1."""
    cert_dir = pki.root / "virt-synchronization-controller-certs"
    woken: list[str] = []
    receivers: list[VirtualMachineInstanceMigration] = []
    desk = SyncDesk(receivers=lambda mid: receivers, vmis=lambda key: None, wake=woken.append)
    server = SyncServer(_config(cert_dir), answer=desk.answer)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(server.run())
        async with asyncio.timeout(10):
            await server.bound.wait()
        yield Served(f"127.0.0.1:{server.port}", _config(cert_dir), woken, desk)
        task.cancel()


async def test_an_offer_and_a_report_cross_the_endpoint(served: Served) -> None:
    """The offer is answered with the desk's pairing (WAITING: no receiving VMIM yet) and
    makes the migrationID synchronized; the report is acknowledged and recorded; each
    wakes the migrationID's receiving VMIMs."""
    peer = RemotePeer(served.url, config=served.config)
    pairing = await peer.offer(SOURCE)
    assert pairing == Pairing(state=PairingState.WAITING, reason="no receiving VMIM for mig-1 yet")
    assert served.desk.synchronized("mig-1") and not served.desk.synchronized("mig-2")
    await peer.report("mig-1", PeerOutcome.SUCCEEDED)
    assert served.desk.outcome("mig-1") == (PeerOutcome.SUCCEEDED, "")
    assert served.woken == ["mig-1", "mig-1"]


async def test_a_bad_frame_is_answered_with_a_failure_naming_the_field(served: Served) -> None:
    """A frame that is not a synchronization message gets a SyncFailure (bad_frame)
    naming the field; the client raises SyncRefused carrying it."""
    host, port = served.url.split(":")
    reader, writer = await asyncio.open_connection(
        host, int(port), ssl=served.config.client_context(), server_hostname=host
    )
    writer.write(encode_frame({"version": 1, "kind": "offer", "source": {"migrationID": 5}}))
    answer = await asyncio.wait_for(read_frame(reader), 5)
    writer.close()
    assert answer is not None and answer["kind"] == "failure"
    assert answer["code"] == "bad_frame"
    assert answer["message"].startswith("source.migrationID: ")


async def test_an_oversized_frame_is_refused_before_its_body(served: Served) -> None:
    """A header announcing more than the sync limits is answered with a failure."""
    host, port = served.url.split(":")
    reader, writer = await asyncio.open_connection(
        host, int(port), ssl=served.config.client_context(), server_hostname=host
    )
    writer.write(HEADER.pack(10 * 1024 * 1024))
    answer = await asyncio.wait_for(read_frame(reader), 5)
    writer.close()
    assert answer is not None and answer["code"] == "frame_too_large"


async def test_a_refusal_reaches_the_client_as_sync_refused(
    served: Served, pki: Pki, tmp_path: Path
) -> None:
    """The handler's certificate (same CA, another CN) is refused by the endpoint: the
    client sees SyncRefused (forbidden); RemoteSending refuses the pairing at once,
    naming the connectURL."""
    handler = SyncConfig(cert_dir=pki.handler, timeout=5.0, peer_cn=SYNC_CN)
    with pytest.raises(SyncRefused) as caught:
        await RemotePeer(served.url, config=handler).offer(SOURCE)
    assert caught.value.failure.code == "forbidden"
    pairing = await RemoteSending(handler).offer("a/out", served.url, SOURCE)
    assert pairing.state is PairingState.REFUSED
    assert pairing.reason.startswith(f"connectURL {served.url}: ")


async def test_a_server_of_another_cn_is_not_trusted(served: Served) -> None:
    """The client checks the server's CN (pod IPs are in no certificate)."""
    config = replace(served.config, peer_cn="kubevirt-py-handler")
    with pytest.raises(SyncUnreachable, match="presented CN 'kubevirt-py-synchronization'"):
        await exchange(served.url, SOURCE, config=config)


async def test_a_foreign_ca_fails_the_handshake(served: Served, tmp_path: Path) -> None:
    """A client whose certificate another CA signed never gets an answer."""
    other, _ = gen_certs(tmp_path / "other")
    config = _config(other.root / "virt-synchronization-controller-certs")
    with pytest.raises(SyncUnreachable):
        await exchange(served.url, SOURCE, config=config)


async def test_an_unreachable_endpoint_fails_the_pairing_naming_the_connect_url(
    pki: Pki,
) -> None:
    """Nothing listens: WAITING after each failed dial, REFUSED after `attempts` in a row,
    the reason naming the connectURL and the dial's error."""
    with socket_port() as port:
        url = f"127.0.0.1:{port}"
    sending = RemoteSending(_config(pki.root / "virt-synchronization-controller-certs"), attempts=2)
    first = await sending.offer("a/out", url, SOURCE)
    assert first.state is PairingState.WAITING
    second = await sending.offer("a/out", url, SOURCE)
    assert second.state is PairingState.REFUSED
    assert second.reason.startswith(f"connectURL {url}: synchronization failed 2 times: ")


async def test_without_a_certificate_another_cluster_is_refused_at_once() -> None:
    """A controller without the synchronization Secret refuses another cluster's
    connectURL, saying why."""
    pairing = await RemoteSending(None).offer("a/out", "10.9.9.9:9185", SOURCE)
    assert pairing.state is PairingState.REFUSED
    assert "no synchronization certificate" in pairing.reason
    assert "10.9.9.9:9185" in pairing.reason


async def test_an_unsent_report_is_kept_and_sent_again(served: Served, pki: Pki) -> None:
    """A success report that does not get through is kept (pending) and resent later;
    a failure of a VMIM whose offers the peer never answered is tried once, not kept
    (an unreachable connectURL never heard of it); once answered, a failure is kept."""
    with socket_port() as port:
        dead = f"127.0.0.1:{port}"
    sending = RemoteSending(served.config)
    success = Report(migration_id="mig-1", outcome=PeerOutcome.SUCCEEDED)
    assert not await sending.report("a/out", dead, success)
    assert sending.pending("a/out")
    assert await sending.report("a/out", served.url, success)
    assert not sending.pending("a/out")
    assert served.desk.outcome("mig-1") == (PeerOutcome.SUCCEEDED, "")
    failure = Report(migration_id="mig-2", outcome=PeerOutcome.FAILED, reason="boom")
    assert await sending.report("a/lost", dead, failure)
    assert not sending.pending("a/lost")
    await sending.offer("a/known", served.url, replace(SOURCE, migration_id="mig-2"))
    assert not await sending.report("a/known", dead, failure)
    assert sending.pending("a/known")


def test_the_config_advertises_the_pod_ip_only_with_a_certificate(pki: Pki) -> None:
    """synchronizationAddresses: host:port (IPv6 bracketed), none without the Secret's
    files; an incomplete cert dir is no endpoint; a bad port is refused."""
    cert_dir = str(pki.root / "virt-synchronization-controller-certs")
    on = SyncConfig.from_flags(cert_dir=cert_dir, port="9185", advertise_host="10.1.0.4")
    assert on.addresses() == ("10.1.0.4:9185",)
    v6 = SyncConfig.from_flags(cert_dir=cert_dir, port="9185", advertise_host="fd00::4")
    assert v6.addresses() == ("[fd00::4]:9185",)
    off = SyncConfig.from_flags(cert_dir=str(pki.ca[0].parent), port="9185", advertise_host="x")
    assert not off.enabled and off.addresses() == ()
    with pytest.raises(ValueError, match="--sync-port"):
        SyncConfig.from_flags(cert_dir="", port="70000", advertise_host="")


def test_the_server_context_requires_a_client_certificate(pki: Pki) -> None:
    """Mutual TLS: the server's context verifies clients against the CA."""
    ctx = _config(pki.root / "virt-synchronization-controller-certs").server_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED


@contextlib.contextmanager
def socket_port() -> Iterator[int]:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    yield port
