"""The synchronization messages of decentralized migration (shared/wire/sync.py): every
message survives its frame, and a malformed frame is refused naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from shared.wire.framing import decode_body, encode_frame
from shared.wire.sync import (
    SYNC_LIMITS,
    Ack,
    BadSyncMessage,
    Pairing,
    PairingState,
    PeerOutcome,
    Report,
    SourceHalf,
    SyncFailure,
    TargetHalf,
    decode_answer,
    decode_request,
    encode,
)

SOURCE = SourceHalf(
    migration_id="mig-1", namespace="a", vmim_name="out", vmi_name="src", vmi_uid="u1",
    source_node="node01", source_pod="virt-launcher-src-x", claim_volumes=("data",),
)  # fmt: skip
TARGET = TargetHalf(
    migration_id="mig-1", migration_uid="u2", namespace="b", vmim_name="in", vmi_name="dst",
    target_node="node02", target_pod="virt-launcher-dst-y", target_node_address="10.2.0.7",
    ports={"40001": 0, "40002": 49152},
)  # fmt: skip


def _through_a_frame(message: Any) -> dict[str, Any]:
    frame = encode_frame(encode(message), max_frame=SYNC_LIMITS.max_frame)
    return decode_body(frame[4:], SYNC_LIMITS)


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(SOURCE, id="offer"),
        pytest.param(Report(migration_id="mig-1", outcome=PeerOutcome.FAILED, reason="x"), id="report"),
    ],
)  # fmt: skip
def test_requests_survive_their_frame(message: Any) -> None:
    """An offer and a report decode to what was encoded (msgpack, the shared framing)."""
    assert decode_request(_through_a_frame(message)) == message


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(Pairing(state=PairingState.READY, target=TARGET), id="ready"),
        pytest.param(Pairing(state=PairingState.WAITING, reason="not yet"), id="waiting"),
        pytest.param(Pairing(state=PairingState.REFUSED, reason="two receivers"), id="refused"),
        pytest.param(Ack(), id="ack"),
        pytest.param(SyncFailure(code="bad_frame", message="kind: ..."), id="failure"),
    ],
)  # fmt: skip
def test_answers_survive_their_frame(message: Any) -> None:
    """Each answer decodes to what was encoded, the target half's ports included."""
    assert decode_answer(_through_a_frame(message)) == message


def _offer(**changes: Any) -> dict[str, Any]:
    frame = encode(SOURCE)
    frame["source"] = {**frame["source"], **changes.pop("source", {})}
    return {**frame, **changes}


@pytest.mark.parametrize(
    ("frame", "field"),
    [
        pytest.param(_offer(version=2), "version", id="version"),
        pytest.param(_offer(kind="hello"), "kind", id="kind"),
        pytest.param(_offer(kind="ack"), "kind", id="answer-as-request"),
        pytest.param({"version": 1, "kind": "offer"}, "source", id="no-source"),
        pytest.param(_offer(source={"migrationID": ""}), "source.migrationID", id="empty-id"),
        pytest.param(_offer(source={"vmiUID": 7}), "source.vmiUID", id="not-a-string"),
        pytest.param(_offer(source={"claimVolumes": "data"}), "source.claimVolumes", id="claims"),
        pytest.param({"version": 1, "kind": "report", "migrationID": "m", "outcome": "Maybe"},
                     "report.outcome", id="outcome"),
    ],
)  # fmt: skip
def test_a_bad_request_frame_is_refused_naming_the_field(frame: dict[str, Any], field: str) -> None:
    """A malformed request raises BadSyncMessage (code bad_frame) naming its field."""
    with pytest.raises(BadSyncMessage) as caught:
        decode_request(frame)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")
    assert caught.value.code == "bad_frame"


@pytest.mark.parametrize(
    ("frame", "field"),
    [
        pytest.param({"version": 1, "kind": "pairing", "state": "Ready"}, "target", id="ready-no-target"),
        pytest.param({"version": 1, "kind": "pairing", "state": "Soon"}, "state", id="state"),
        pytest.param({**encode(Pairing(state=PairingState.READY, target=TARGET)),
                      "target": {**encode(Pairing(state=PairingState.READY, target=TARGET))["target"],
                                 "ports": {"40001": 70000}}}, "target.ports", id="port"),
        pytest.param({"version": 1, "kind": "offer"}, "kind", id="request-as-answer"),
    ],
)  # fmt: skip
def test_a_bad_answer_frame_is_refused_naming_the_field(frame: dict[str, Any], field: str) -> None:
    """A malformed answer raises BadSyncMessage naming its field (a Ready pairing must
    carry the target half; ports are port numbers)."""
    with pytest.raises(BadSyncMessage) as caught:
        decode_answer(frame)
    assert caught.value.field == field
