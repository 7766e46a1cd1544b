"""admission.k8s.io/v1 AdmissionReview: reading a request, writing the answer.

A refusal is a Status 422 Invalid whose message names every field (kubectl shows it as
`admission webhook "…" denied the request: <message>`) and whose details carry one cause
per field, as the API server's own validation answers.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.model import FieldError
from shared.model.unsupported import NOT_SUPPORTED
from virt_api.errors import VirtApiError

API_VERSION = "admission.k8s.io/v1"


class BadReview(VirtApiError):
    """The body is not an AdmissionReview request this server can answer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionRequest:
    """The parts of AdmissionReview.request admission uses."""

    uid: str
    kind: str
    operation: str
    namespace: str
    name: str
    obj: Mapping[str, Any]
    old: Mapping[str, Any] | None
    # request.dryRun: the write will not persist, so the webhook must have no side effects.
    dry_run: bool = False


def _str(d: Mapping[str, Any], key: str) -> str:
    value = d.get(key)
    return value if isinstance(value, str) else ""


def parse_review(body: Any) -> AdmissionRequest:
    """The request of an AdmissionReview v1; BadReview when it is not one."""
    if not isinstance(body, Mapping) or body.get("apiVersion") != API_VERSION:
        raise BadReview(f"expected an {API_VERSION} AdmissionReview")
    req = body.get("request")
    if not isinstance(req, Mapping) or not _str(req, "uid"):
        raise BadReview("AdmissionReview without a request uid")
    kind = req.get("kind")
    obj = req.get("object")
    old = req.get("oldObject")
    return AdmissionRequest(
        uid=_str(req, "uid"),
        kind=_str(kind, "kind") if isinstance(kind, Mapping) else "",
        operation=_str(req, "operation"),
        namespace=_str(req, "namespace"),
        name=_str(req, "name"),
        obj=obj if isinstance(obj, Mapping) else {},
        old=old if isinstance(old, Mapping) else None,
        dry_run=req.get("dryRun") is True,
    )


def _review(response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def allow(uid: str, patch: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """Allowed, with a JSONPatch when there is one."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        encoded = base64.b64encode(json.dumps(list(patch)).encode()).decode()
        response |= {"patchType": "JSONPatch", "patch": encoded}
    return _review(response)


def too_many_requests(uid: str, message: str) -> dict[str, Any]:
    """Refused with 429 TooManyRequests: what `kubectl drain` retries (an eviction held
    back, as a PodDisruptionBudget's answer)."""
    status = {"code": 429, "reason": "TooManyRequests", "message": message}
    return _review({"uid": uid, "allowed": False, "status": status})


def refusal_message(kind: str, name: str, errors: Sequence[FieldError]) -> str:
    """`<Kind> "<name>" is invalid: <path>: <message>; …` naming every field."""
    label = f'{kind} "{name}"' if name else kind
    return f"{label} is invalid: " + "; ".join(str(e) for e in errors)


def _reason(error: FieldError) -> str:
    return "FieldValueNotSupported" if error.message == NOT_SUPPORTED else "FieldValueInvalid"


def deny(uid: str, *, kind: str, name: str, errors: Sequence[FieldError]) -> dict[str, Any]:
    """Refused: Status 422 Invalid with one cause per field."""
    causes = [{"reason": _reason(e), "field": e.path, "message": e.message} for e in errors]
    status = {
        "code": 422,
        "reason": "Invalid",
        "message": refusal_message(kind, name, errors),
        "details": {"name": name, "kind": kind, "causes": causes},
    }
    return _review({"uid": uid, "allowed": False, "status": status})
