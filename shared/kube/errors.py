"""Typed errors of the Kubernetes API edge: callers branch on classes, never on status codes.

The API server answers failures with a `Status` object (`code`, `reason`, `message`);
`error_from_status` turns one into the class below that matches its HTTP code, so a
controller writes `except Conflict:` instead of `if e.status == 409`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class KubeError(Exception):
    """Base class of every error raised by `shared.kube`."""


class ConfigError(KubeError):
    """Neither a usable kubeconfig nor an in-cluster service account was found."""


class TransportError(KubeError):
    """The request never got an HTTP answer (connection refused, reset, TLS, timeout)."""


class ApiError(KubeError):
    """The API server answered with a non-2xx status."""

    status: int = 0

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class BadRequest(ApiError):
    """400: the request itself is malformed (bad patch, bad selector)."""


class Unauthorized(ApiError):
    """401: the credentials were refused."""


class Forbidden(ApiError):
    """403: RBAC denies the verb on the resource."""


class NotFound(ApiError):
    """404: the object (or the resource type) does not exist."""


class Conflict(ApiError):
    """409 with reason Conflict: the resourceVersion (or a precondition) is stale."""


class AlreadyExists(ApiError):
    """409 with reason AlreadyExists: create of a name that is taken."""


class Gone(ApiError):
    """410: the resourceVersion is too old (compacted); the caller must relist."""


Expired = Gone


class Invalid(ApiError):
    """422: the object fails the API server's validation."""


class TooManyRequests(ApiError):
    """429: the API server's priority and fairness rejected the request."""


class ServerError(ApiError):
    """5xx: the API server (or etcd behind it) failed."""


_BY_STATUS: Mapping[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def error_from_status(status: int, body: Mapping[str, Any] | None) -> ApiError:
    """The typed error for an HTTP status and (when present) the API server's Status body."""
    body = body or {}
    reason = str(body.get("reason") or "")
    message = str(body.get("message") or "")
    code = body.get("code")
    if isinstance(code, int) and code >= 400:
        status = code
    if status == 409:
        cls: type[ApiError] = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif status >= 500:
        cls = ServerError
    else:
        cls = _BY_STATUS.get(status, ApiError)
    return cls(status, reason or _default_reason(status), message)


def _default_reason(status: int) -> str:
    return {
        400: "BadRequest",
        401: "Unauthorized",
        403: "Forbidden",
        404: "NotFound",
        409: "Conflict",
        410: "Expired",
        422: "Invalid",
        429: "TooManyRequests",
    }.get(status, "InternalError" if status >= 500 else "Unknown")
