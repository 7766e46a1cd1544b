"""Authorizing each action with a SubjectAccessReview, so RBAC is checked here as well.

kube-apiserver already authorized the proxied request; the review is the second gate
KubeVirt's virt-api also keeps (anything holding the front-proxy certificate could call
us directly). A review that cannot be made is a failure, never an allow.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from shared.actions import GROUP, RESOURCE, VERSION, ActionSpec
from shared.kube import KubeError, Resource
from shared.kube.ports import Creates
from shared.tasks import cancelling
from virt_api.subresources.authn import UserInfo
from virt_api.subresources.errors import Denied, SubresourceError, VmiRef

log = structlog.get_logger("virt_api.subresources.authz")

SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceAttributes:
    """What is asked: `verb` on `<group>/<resource>/<subresource>` `name` in `namespace`."""

    namespace: str
    name: str
    verb: str
    subresource: str
    group: str = GROUP
    version: str = VERSION
    resource: str = RESOURCE

    @classmethod
    def of(cls, spec: ActionSpec, vmi: VmiRef) -> ResourceAttributes:
        """The attributes of calling `spec` on `vmi`."""
        return cls(
            namespace=vmi.namespace,
            name=vmi.name,
            verb=spec.verb,
            subresource=spec.action,
            resource=spec.resource,
        )

    def to_dict(self) -> dict[str, str]:
        return {
            "namespace": self.namespace,
            "verb": self.verb,
            "group": self.group,
            "version": self.version,
            "resource": self.resource,
            "subresource": self.subresource,
            "name": self.name,
        }


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""


class Authorizer(Protocol):
    async def authorize(self, user: UserInfo, attrs: ResourceAttributes) -> Decision: ...


def sar_body(user: UserInfo, attrs: ResourceAttributes) -> dict[str, Any]:
    """The SubjectAccessReview for `user` doing `attrs`."""
    spec: dict[str, Any] = {
        "user": user.name,
        "groups": list(user.groups),
        "resourceAttributes": attrs.to_dict(),
    }
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra.items()}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


class SarAuthorizer:
    """Asks kube-apiserver (needs `create subjectaccessreviews`: system:auth-delegator)."""

    def __init__(self, kube: Creates, *, timeout: float = 10.0) -> None:
        self._kube = kube
        self._timeout = timeout

    async def authorize(self, user: UserInfo, attrs: ResourceAttributes) -> Decision:
        try:
            async with asyncio.timeout(self._timeout):
                answer = await self._kube.create(SUBJECT_ACCESS_REVIEWS, sar_body(user, attrs))
        except TimeoutError as e:
            if cancelling():
                raise
            raise SubresourceError("the authorization check timed out") from e
        except KubeError as e:
            log.warning("subject_access_review_failed", error=str(e))
            raise SubresourceError(f"the authorization check failed: {e}") from e
        status = answer.get("status") or {}
        allowed = bool(status.get("allowed")) and not status.get("denied")
        return Decision(allowed, str(status.get("reason") or status.get("evaluationError") or ""))


async def require(authorizer: Authorizer, user: UserInfo, attrs: ResourceAttributes) -> None:
    """Return when allowed; Denied with a Kubernetes-style message otherwise."""
    decision = await authorizer.authorize(user, attrs)
    if decision.allowed:
        return
    what = f"{attrs.resource}/{attrs.subresource}"
    message = (
        f'{attrs.resource}.{attrs.group} "{attrs.name}" is forbidden: User "{user.name}" '
        f'cannot {attrs.verb} resource "{what}" in API group "{attrs.group}" '
        f'in the namespace "{attrs.namespace}"'
    )
    if decision.reason:
        message += f": {decision.reason}"
    raise Denied(message, vmi=VmiRef(namespace=attrs.namespace, name=attrs.name))
