"""upload.cdi.kubevirt.io/v1beta1, as CDI's apiserver serves it to `virtctl image-upload`:

    GET  /apis/upload.cdi.kubevirt.io[/v1beta1]     discovery (the aggregator's checks)
    POST /apis/upload.cdi.kubevirt.io/v1beta1/namespaces/<ns>/uploadtokenrequests
         {"spec": {"pvcName": "<claim>"}} → 201, the same object with status.token

kube-apiserver authenticated the caller and authorized `create uploadtokenrequests` before
proxying; the request is reviewed again here (SubjectAccessReview), as every subresource
call is. The token lets its holder upload into that one claim for five minutes, through the
upload proxy (virt_api.upload.proxy). Nothing is stored: the object exists only in the
answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from aiohttp import web

from shared.model import format_time
from virt_api.subresources.authn import UserInfo
from virt_api.subresources.authz import Authorizer, ResourceAttributes, require
from virt_api.subresources.errors import BadRequest, MethodNotAllowed, VmiRef
from virt_api.upload.token import TokenSigner

log = structlog.get_logger("virt_api.upload")

GROUP = "upload.cdi.kubevirt.io"
VERSION = "v1beta1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
RESOURCE = "uploadtokenrequests"
KIND = "UploadTokenRequest"
TOKEN_REQUEST_PATH = f"/apis/{GROUP_VERSION}/namespaces/{{namespace}}/{RESOURCE}"
MAX_BODY = 64 * 1024
UserOf = Callable[[web.Request], UserInfo]


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenApi:
    """Issues upload tokens to callers allowed to create UploadTokenRequests."""

    signer: TokenSigner
    authorizer: Authorizer
    clock: Callable[[], float] = field(default=time.time)

    async def create(self, request: web.Request, user: UserInfo) -> web.StreamResponse:
        """POST …/uploadtokenrequests."""
        ns = request.match_info["namespace"]
        if request.method != "POST":
            raise MethodNotAllowed(f"{RESOURCE} take POST, not {request.method}")
        body = await _body(request, ns)
        spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
        claim = spec.get("pvcName") if isinstance(spec, dict) else None
        name = str((body.get("metadata") or {}).get("name") or "")
        ref = VmiRef(namespace=ns, name=name, group=GROUP, kind=RESOURCE)
        if not isinstance(claim, str) or not claim:
            raise BadRequest("spec.pvcName: required (the claim to upload into)", vmi=ref)
        attrs = ResourceAttributes(
            namespace=ns, name="", verb="create", subresource="",
            group=GROUP, version=VERSION, resource=RESOURCE,
        )  # fmt: skip
        await require(self.authorizer, user, attrs)
        now = self.clock()
        token = self.signer.issue(namespace=ns, claim=claim, now=now)
        log.info("upload_token_issued", namespace=ns, claim=claim, user=user.name)
        answer = {
            "apiVersion": GROUP_VERSION,
            "kind": KIND,
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": _stamp(now)},
            "spec": {"pvcName": claim},
            "status": {"token": token},
        }
        return web.json_response(answer, status=201)


def _stamp(now: float) -> str:
    return format_time(datetime.fromtimestamp(now, UTC))


async def _body(request: web.Request, ns: str) -> dict[str, Any]:
    ref = VmiRef(namespace=ns, name="", group=GROUP, kind=RESOURCE)
    raw = await request.content.read(MAX_BODY + 1)
    if len(raw) > MAX_BODY:
        raise BadRequest(f"the {KIND} is larger than {MAX_BODY} bytes", vmi=ref)
    try:
        body = json.loads(raw or b"{}")
    except ValueError as e:
        raise BadRequest(f"the {KIND} is not JSON: {e}", vmi=ref) from None
    if not isinstance(body, dict):
        raise BadRequest(f"the {KIND} must be a JSON object", vmi=ref)
    return body


def api_group() -> dict[str, Any]:
    """GET /apis/upload.cdi.kubevirt.io (its entry in /apis too)."""
    version = {"groupVersion": GROUP_VERSION, "version": VERSION}
    return {"kind": "APIGroup", "apiVersion": "v1", "name": GROUP, "versions": [version],
            "preferredVersion": version}  # fmt: skip


def api_resource_list() -> dict[str, Any]:
    """GET /apis/upload.cdi.kubevirt.io/v1beta1."""
    resource = {"name": RESOURCE, "singularName": "uploadtokenrequest", "namespaced": True,
                "kind": KIND, "verbs": ["create"]}  # fmt: skip
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
            "resources": [resource]}  # fmt: skip
