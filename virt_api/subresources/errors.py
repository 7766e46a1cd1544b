"""Failures of the subresource API, each rendered as a Kubernetes `Status` object.

kubectl, client-go and virtctl read `code`, `reason` and `message` of a Status; the
handler's (and launcher's) own error code travels in `details.causes`, so a caller sees
both what the API decided (409, 502 …) and what the launcher said (agent_not_connected …).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.actions import GROUP, RESOURCE


class StatusReason(StrEnum):
    """metav1.StatusReason values used here."""

    UNAUTHORIZED = "Unauthorized"
    FORBIDDEN = "Forbidden"
    NOT_FOUND = "NotFound"
    CONFLICT = "Conflict"
    BAD_REQUEST = "BadRequest"
    METHOD_NOT_ALLOWED = "MethodNotAllowed"
    INTERNAL_ERROR = "InternalError"
    SERVICE_UNAVAILABLE = "ServiceUnavailable"
    TIMEOUT = "Timeout"


@dataclass(frozen=True, slots=True, kw_only=True)
class Cause:
    """One metav1.StatusCause: a machine-readable `reason` and its message."""

    reason: str
    message: str
    field: str = ""

    def to_dict(self) -> dict[str, str]:
        body = {"reason": self.reason, "message": self.message}
        if self.field:
            body["field"] = self.field
        return body


@dataclass(frozen=True, slots=True, kw_only=True)
class VmiRef:
    """The object a failure is about (StatusDetails name/group/kind): a VMI unless told."""

    namespace: str
    name: str
    group: str = GROUP
    kind: str = RESOURCE


class SubresourceError(Exception):
    """Base class of every error of the subresource API; carries the Status it becomes."""

    code: int = 500
    reason: StatusReason = StatusReason.INTERNAL_ERROR

    def __init__(
        self, message: str, *, vmi: VmiRef | None = None, causes: Sequence[Cause] = ()
    ) -> None:
        super().__init__(message)
        self.message = message
        self.vmi = vmi
        self.causes = tuple(causes)

    def to_status(self) -> dict[str, Any]:
        """The Status body."""
        details: dict[str, Any] = {}
        if self.vmi is not None:
            details = {"name": self.vmi.name, "group": self.vmi.group, "kind": self.vmi.kind}
        if self.causes:
            details["causes"] = [c.to_dict() for c in self.causes]
        return status_body(self.code, self.reason, self.message, details=details)


class Unauthenticated(SubresourceError):
    """The caller is not the front proxy (no or wrong client certificate, no user)."""

    code, reason = 401, StatusReason.UNAUTHORIZED


class BadRequest(SubresourceError):
    """The request cannot be served as made (a console without a websocket upgrade)."""

    code, reason = 400, StatusReason.BAD_REQUEST


class Denied(SubresourceError):
    """The SubjectAccessReview did not allow the call."""

    code, reason = 403, StatusReason.FORBIDDEN


class NotFound(SubresourceError):
    """No such VMI, action or path."""

    code, reason = 404, StatusReason.NOT_FOUND


class MethodNotAllowed(SubresourceError):
    """The action exists but not with this HTTP method (PUT pause, GET guestosinfo)."""

    code, reason = 405, StatusReason.METHOD_NOT_ALLOWED


class NotRunning(SubresourceError):
    """The VMI has no running guest to act on (not Running, or no node yet)."""

    code, reason = 409, StatusReason.CONFLICT


class Conflict(SubresourceError):
    """The object's state refuses the request (start a running VM, a request underway)."""

    code, reason = 409, StatusReason.CONFLICT


class BadGateway(SubresourceError):
    """The node's handler (or its launcher) failed; causes carry its error code."""

    code, reason = 502, StatusReason.INTERNAL_ERROR


class HandlerUnavailable(SubresourceError):
    """The node's handler has not published an actions endpoint."""

    code, reason = 503, StatusReason.SERVICE_UNAVAILABLE


class GatewayTimeout(SubresourceError):
    """The node's handler (or its launcher) did not answer in time."""

    code, reason = 504, StatusReason.TIMEOUT


class SetupError(SubresourceError):
    """The API cannot start: unusable certificates or extension-apiserver-authentication."""


def status_body(
    code: int, reason: str, message: str, *, details: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A metav1.Status of a failure."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = dict(details)
    return body
