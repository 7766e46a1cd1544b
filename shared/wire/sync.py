"""Decentralized live migration between clusters: the synchronization messages.

KubeVirt's virt-synchronization-controller lets the sending cluster's controller talk to
the receiving cluster's at the sending VMIM's `connectURL`. kubevirt-py's controllers
exchange the same messages as their in-process pairing (controller/migration/
decentral.py's `MigrationPeer`), typed here once:

    sending controller                              receiving controller (leader, :9185)
      SourceHalf  (offer of the running VMI)  ──▶   pairs it with its receiving VMIM
                                              ◀──   Pairing (WAITING | READY + TargetHalf
                                                             | REFUSED + reason)
      Report      (how the sending side ended) ──▶   the receiving VMIM follows it
                                              ◀──   Ack
      anything malformed                      ◀──   SyncFailure (code, message)

One request frame and one answer frame per connection (shared/wire/framing.py: a 4-byte
length, then one msgpack map), over mutual TLS with the kubevirt-py CA (the controllers'
synchronization certificate, CN `SYNC_CN`). A malformed frame raises `BadSyncMessage`,
naming the field.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from shared.wire.errors import ErrorCode, ProtocolViolation
from shared.wire.limits import Limits

SYNC_VERSION = 1
SYNC_PORT = 9185
SYNC_CN = "kubevirt-py-synchronization"
# A synchronization message is a few hundred bytes: no peer may make us hold more.
SYNC_LIMITS = Limits(
    max_frame=64 * 1024, max_str_len=4096, max_bin_len=0, max_array_len=256, max_map_len=64,
    max_depth=4, max_objects=2048,
)  # fmt: skip


class BadSyncMessage(ProtocolViolation):
    """A synchronization frame that is not a valid message; `field` names the culprit."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(ErrorCode.BAD_FRAME, f"{field_name}: {message}", {"field": field_name})
        self.field = field_name


class SyncKind(enum.StrEnum):
    """The `kind` of a synchronization frame."""

    OFFER = "offer"
    REPORT = "report"
    PAIRING = "pairing"
    ACK = "ack"
    FAILURE = "failure"


class PairingState(enum.StrEnum):
    """Where a sending half stands with its receiving half."""

    WAITING = "Waiting"
    READY = "Ready"
    REFUSED = "Refused"


class PeerOutcome(enum.StrEnum):
    """How the sending side ended, told to the receiving side."""

    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceHalf:
    """What the sending side offers: its running VMI and where it runs."""

    migration_id: str
    namespace: str
    vmim_name: str
    vmi_name: str
    vmi_uid: str
    source_node: str
    source_pod: str
    # Its claim volumes, copied into the receiving VMI's claims of the same names.
    claim_volumes: tuple[str, ...] = ()

    @property
    def vmi_key(self) -> str:
        """The sending VMI's "namespace/name"."""
        return f"{self.namespace}/{self.vmi_name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetHalf:
    """What the receiving side publishes once its target launcher and handler are ready."""

    migration_id: str
    # The receiving VMIM's UID: it names the migration's dir in the target pod.
    migration_uid: str = ""
    namespace: str
    vmim_name: str
    vmi_name: str
    target_node: str
    target_pod: str
    target_node_address: str
    # The target handler's migration proxy ports (port → stream), as in migrationState.
    ports: Mapping[str, int] = field(default_factory=dict)

    @property
    def vmi_key(self) -> str:
        """The receiving VMI's "namespace/name"."""
        return f"{self.namespace}/{self.vmi_name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Pairing:
    """The answer to an offer."""

    state: PairingState
    target: TargetHalf | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """The sending side's end."""

    migration_id: str
    outcome: PeerOutcome
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Ack:
    """A report was taken."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncFailure:
    """The peer could not take the request (a bad frame, a version it does not speak)."""

    code: str
    message: str


_E = TypeVar("_E", bound=enum.StrEnum)
Request = SourceHalf | Report
Answer = Pairing | Ack | SyncFailure

_SOURCE = ("migrationID", "namespace", "vmimName", "vmiName", "vmiUID", "sourceNode", "sourcePod")
_TARGET = ("migrationID", "namespace", "vmimName", "vmiName", "targetNode", "targetPod",
           "targetNodeAddress")  # fmt: skip


def _str(data: Mapping[str, Any], key: str, *, where: str, required: bool = True) -> str:
    value = data.get(key, None if required else "")
    if not isinstance(value, str) or (required and not value):
        raise BadSyncMessage(f"{where}.{key}", "a non-empty string is required")
    return value


def _map(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, Mapping):
        raise BadSyncMessage(key, "a map is required")
    return value


def _enum(kind: type[_E], value: Any, *, where: str) -> _E:
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(k.value for k in kind)
        raise BadSyncMessage(where, f"must be one of {known}, not {value!r}") from None


def _source_to_wire(s: SourceHalf) -> dict[str, Any]:
    return {"migrationID": s.migration_id, "namespace": s.namespace, "vmimName": s.vmim_name,
            "vmiName": s.vmi_name, "vmiUID": s.vmi_uid, "sourceNode": s.source_node,
            "sourcePod": s.source_pod, "claimVolumes": list(s.claim_volumes)}  # fmt: skip


def _source_from_wire(d: Mapping[str, Any]) -> SourceHalf:
    f = {k: _str(d, k, where="source") for k in _SOURCE}
    claims = d.get("claimVolumes", [])
    if not isinstance(claims, list) or not all(isinstance(c, str) for c in claims):
        raise BadSyncMessage("source.claimVolumes", "a list of strings is required")
    return SourceHalf(
        migration_id=f["migrationID"], namespace=f["namespace"], vmim_name=f["vmimName"],
        vmi_name=f["vmiName"], vmi_uid=f["vmiUID"], source_node=f["sourceNode"],
        source_pod=f["sourcePod"], claim_volumes=tuple(claims),
    )  # fmt: skip


def _target_to_wire(t: TargetHalf) -> dict[str, Any]:
    return {"migrationID": t.migration_id, "migrationUID": t.migration_uid,
            "namespace": t.namespace, "vmimName": t.vmim_name, "vmiName": t.vmi_name,
            "targetNode": t.target_node, "targetPod": t.target_pod,
            "targetNodeAddress": t.target_node_address, "ports": dict(t.ports)}  # fmt: skip


def _target_from_wire(d: Mapping[str, Any]) -> TargetHalf:
    f = {k: _str(d, k, where="target") for k in _TARGET}
    ports = d.get("ports", {})
    if not isinstance(ports, Mapping) or not all(
        isinstance(k, str) and isinstance(v, int) and 0 <= v < 65536 for k, v in ports.items()
    ):
        raise BadSyncMessage("target.ports", "a map of port names to ports is required")
    return TargetHalf(
        migration_id=f["migrationID"], migration_uid=_str(d, "migrationUID", where="target",
        required=False), namespace=f["namespace"], vmim_name=f["vmimName"],
        vmi_name=f["vmiName"], target_node=f["targetNode"], target_pod=f["targetPod"],
        target_node_address=f["targetNodeAddress"], ports=dict(ports),
    )  # fmt: skip


def encode(message: Request | Answer) -> dict[str, Any]:
    """The frame's map for `message`."""
    head: dict[str, Any] = {"version": SYNC_VERSION}
    match message:
        case SourceHalf():
            return {**head, "kind": SyncKind.OFFER.value, "source": _source_to_wire(message)}
        case Report():
            return {**head, "kind": SyncKind.REPORT.value, "migrationID": message.migration_id,
                    "outcome": message.outcome.value, "reason": message.reason}  # fmt: skip
        case Pairing():
            out = {**head, "kind": SyncKind.PAIRING.value, "state": message.state.value,
                   "reason": message.reason}  # fmt: skip
            if message.target is not None:
                out["target"] = _target_to_wire(message.target)
            return out
        case Ack():
            return {**head, "kind": SyncKind.ACK.value}
        case SyncFailure():
            return {**head, "kind": SyncKind.FAILURE.value, "code": message.code,
                    "message": message.message}  # fmt: skip


def _kind(frame: Mapping[str, Any]) -> SyncKind:
    if frame.get("version") != SYNC_VERSION:
        raise BadSyncMessage("version", f"must be {SYNC_VERSION}, not {frame.get('version')!r}")
    return _enum(SyncKind, frame.get("kind"), where="kind")


def decode_request(frame: Mapping[str, Any]) -> Request:
    """A request (offer or report) from its frame; BadSyncMessage when malformed."""
    kind = _kind(frame)
    if kind is SyncKind.OFFER:
        return _source_from_wire(_map(frame, "source"))
    if kind is SyncKind.REPORT:
        return Report(
            migration_id=_str(frame, "migrationID", where="report"),
            outcome=_enum(PeerOutcome, frame.get("outcome"), where="report.outcome"),
            reason=_str(frame, "reason", where="report", required=False),
        )
    raise BadSyncMessage("kind", f"{kind.value} is not a request")


def decode_answer(frame: Mapping[str, Any]) -> Answer:
    """An answer (pairing, ack or failure) from its frame; BadSyncMessage when malformed."""
    kind = _kind(frame)
    if kind is SyncKind.PAIRING:
        state = _enum(PairingState, frame.get("state"), where="state")
        target = _target_from_wire(_map(frame, "target")) if "target" in frame else None
        if state is PairingState.READY and target is None:
            raise BadSyncMessage("target", "a Ready pairing carries the target half")
        reason = _str(frame, "reason", where="pairing", required=False)
        return Pairing(state=state, target=target, reason=reason)
    if kind is SyncKind.ACK:
        return Ack()
    if kind is SyncKind.FAILURE:
        code = _str(frame, "code", where="failure")
        return SyncFailure(code=code, message=_str(frame, "message", where="failure"))
    raise BadSyncMessage("kind", f"{kind.value} is not an answer")
