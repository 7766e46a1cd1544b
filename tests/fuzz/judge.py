"""What the API server's answer to one fuzzed object means (pure)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

# A field path in a refusal: `spec.domain...`, `spec: Invalid value`, `metadata.name`,
# `spec.volumes[0]`.
FIELD_PATH = re.compile(r"\b(?:spec|metadata)(?:\.[A-Za-z]|\[|:|\b)")


class Outcome(StrEnum):
    ACCEPTED = "accepted"
    REFUSED = "refused"  # 4xx naming a field
    REFUSED_UNNAMED = "refused-unnamed"  # 4xx naming none: a finding
    SERVER_ERROR = "server-error"  # 5xx: a finding (an API server or webhook crash)


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    status: int
    message: str
    outcome: Outcome


def judge(status: int, text: str) -> Answer:
    """Classify one HTTP answer (status code and body) to a create."""
    message = status_message(text)
    if 200 <= status < 300:
        outcome = Outcome.ACCEPTED
    elif status >= 500:
        outcome = Outcome.SERVER_ERROR
    elif FIELD_PATH.search(message):
        outcome = Outcome.REFUSED
    else:
        outcome = Outcome.REFUSED_UNNAMED
    return Answer(status=status, message=message, outcome=outcome)


def status_message(text: str) -> str:
    """A `Status` body's message with its causes' fields; the raw text otherwise."""
    try:
        body = json.loads(text)
    except ValueError:
        return text[:2000]
    if not isinstance(body, Mapping) or body.get("kind") != "Status":
        return ""
    parts = [str(body.get("message", ""))]
    details = body.get("details") or {}
    for cause in details.get("causes") or ():
        parts.append(f"{cause.get('field', '')}: {cause.get('message', '')}")
    return "\n".join(parts)[:4000]


def has_status(obj: Mapping[str, Any]) -> bool:
    """True once an object carries a phase, a condition, a printable status, or (replica
    sets and pools, which have no phase and conditions only when paused or failing) the
    label selector their controller writes with the replica counts."""
    status = obj.get("status") or {}
    if not isinstance(status, Mapping):
        return False
    keys = ("phase", "conditions", "printableStatus", "labelSelector")
    return any(status.get(key) for key in keys)
