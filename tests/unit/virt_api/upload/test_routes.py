"""CDI's upload API on the subresource server: UploadTokenRequests for reviewed callers,
and the upload proxy relaying a token holder's body to the claim's upload server."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from shared.kube import NotFound, Resource
from tests.unit.virt_api.subresources.fakes import FakeAuthorizer, deps, proxied
from uploadserver.server import ServerConfig, UploadState
from uploadserver.server import build_app as upload_server_app
from virt_api.subresources.app import build_app
from virt_api.upload.api import TokenApi
from virt_api.upload.proxy import UploadProxy
from virt_api.upload.routes import Uploads
from virt_api.upload.token import TokenSigner

TOKENS = "/apis/upload.cdi.kubevirt.io/v1beta1/namespaces/ns1/uploadtokenrequests"
NOW = 1_800_000_000.0
SIGNER = TokenSigner(b"key")


@dataclasses.dataclass
class FakePods:
    """Pods by (namespace, name); missing ones raise NotFound like the client."""

    pods: dict[tuple[str, str], dict[str, Any]] = dataclasses.field(default_factory=dict)

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        try:
            return self.pods[(namespace or "", name)]
        except KeyError:
            raise NotFound(404, "NotFound", name) from None


def running(*names: str) -> FakePods:
    return FakePods({("ns1", name): {"status": {"phase": "Running"}} for name in names})


@contextlib.asynccontextmanager
async def upload_server(tmp_path: Path) -> AsyncIterator[tuple[int, Path]]:
    """The real upload server app (its command copies the upload to `done`), on a port."""
    out, done = tmp_path / "disk", tmp_path / "done"
    command = [sys.executable, "-c", f"import shutil; shutil.copy({str(out)!r}, {str(done)!r})"]
    app = upload_server_app(ServerConfig(out=out, command=command), UploadState())
    async with TestServer(app) as server:
        assert server.port is not None
        yield server.port, done


def client(
    *, pods: FakePods, local: int = 1, authorizer: FakeAuthorizer | None = None
) -> TestClient[web.Request, web.Application]:
    """The subresource app with uploads; every pod port is forwarded to `local`."""

    @contextlib.asynccontextmanager
    async def forward(*, namespace: str, pod: str, port: int) -> AsyncIterator[int]:
        assert (namespace, pod, port) == ("ns1", "cdi-upload-disk", 8080)
        yield local

    uploads = Uploads(
        api=TokenApi(signer=SIGNER, authorizer=authorizer or FakeAuthorizer(), clock=lambda: NOW),
        proxy=UploadProxy(signer=SIGNER, pods=pods, forward=forward, clock=lambda: NOW),
    )
    app_deps = dataclasses.replace(deps(authorizer=authorizer), uploads=uploads)
    return TestClient(TestServer(build_app(app_deps)))


async def test_a_reviewed_caller_gets_a_token_for_the_claim_it_names() -> None:
    """POST uploadtokenrequests answers 201 with status.token, good for that claim; the
    caller was reviewed for create uploadtokenrequests in upload.cdi.kubevirt.io."""
    authorizer = FakeAuthorizer()
    async with client(pods=running(), authorizer=authorizer) as c:
        body = {"metadata": {"name": "token-for-virtctl"}, "spec": {"pvcName": "disk"}}
        resp = await c.post(TOKENS, json=body, headers=proxied("alice"))
        assert resp.status == 201, await resp.text()
        answer = await resp.json()
    assert (answer["kind"], answer["apiVersion"]) == (
        "UploadTokenRequest",
        "upload.cdi.kubevirt.io/v1beta1",
    )
    grant = SIGNER.verify(answer["status"]["token"], now=NOW)
    assert (grant.namespace, grant.claim) == ("ns1", "disk")
    ((user, attrs),) = authorizer.reviews
    assert (user.name, attrs.group, attrs.resource, attrs.verb, attrs.namespace) == (
        "alice",
        "upload.cdi.kubevirt.io",
        "uploadtokenrequests",
        "create",
        "ns1",
    )


async def test_a_token_request_without_a_claim_is_refused_naming_the_field() -> None:
    """No spec.pvcName: 400 Status naming it; a caller the review denies: 403."""
    async with client(pods=running()) as c:
        resp = await c.post(TOKENS, json={"spec": {}}, headers=proxied())
        assert resp.status == 400
        assert "spec.pvcName" in (await resp.json())["message"]
    async with client(pods=running(), authorizer=FakeAuthorizer(allow=False)) as c:
        resp = await c.post(TOKENS, json={"spec": {"pvcName": "d"}}, headers=proxied())
        assert resp.status == 403


async def test_discovery_lists_the_upload_group() -> None:
    """/apis names upload.cdi.kubevirt.io; its version lists uploadtokenrequests (create)."""
    async with client(pods=running()) as c:
        groups = await (await c.get("/apis", headers=proxied())).json()
        resources = await (
            await c.get("/apis/upload.cdi.kubevirt.io/v1beta1", headers=proxied())
        ).json()
    assert "upload.cdi.kubevirt.io" in [g["name"] for g in groups["groups"]]
    assert [(r["name"], r["verbs"]) for r in resources["resources"]] == [
        ("uploadtokenrequests", ["create"])
    ]


async def test_a_token_holder_uploads_through_the_proxy(tmp_path: Path) -> None:
    """POST /v1beta1/upload with a valid bearer token: the body reaches the claim's upload
    server whole (no front proxy, no client certificate) and its 200 comes back."""
    token = SIGNER.issue(namespace="ns1", claim="disk", now=NOW)
    async with upload_server(tmp_path) as (port, done):
        c = client(pods=running("cdi-upload-disk"), local=port)
        async with c:
            resp = await c.post(
                "/v1beta1/upload",
                data=b"x" * 300_000,
                headers={"Authorization": f"Bearer {token}"},
            )
            assert resp.status == 200, await resp.text()
    assert done.read_bytes() == b"x" * 300_000


@pytest.mark.parametrize(
    ("authorization", "why"),
    [
        (None, "Authorization: Bearer"),
        ("Bearer not-a-token", "malformed"),
        (f"Bearer {TokenSigner(b'other').issue(namespace='ns1', claim='disk', now=NOW)}",
         "signature is invalid"),
        (f"Bearer {SIGNER.issue(namespace='ns1', claim='disk', now=NOW - 600)}", "expired"),
    ],
)  # fmt: skip
async def test_a_bad_token_is_refused_with_the_reason(authorization: str | None, why: str) -> None:
    """No token, garbage, another key's token or an expired one: 401 Status saying why, and
    nothing is forwarded."""
    headers = {"Authorization": authorization} if authorization else {}
    async with client(pods=running("cdi-upload-disk")) as c:
        resp = await c.post("/v1beta1/upload", data=b"disk", headers=headers)
        assert resp.status == 401
        body = await resp.json()
    assert (body["kind"], body["reason"]) == ("Status", "Unauthorized")
    assert why in body["message"], body["message"]


async def test_an_upload_before_the_server_runs_is_answered_503() -> None:
    """A valid token whose claim has no running upload server pod: 503 saying to wait for
    UploadReady."""
    token = SIGNER.issue(namespace="ns1", claim="disk", now=NOW)
    async with client(pods=running()) as c:
        resp = await c.post(
            "/v1beta1/upload", data=b"disk", headers={"Authorization": f"Bearer {token}"}
        )
        assert resp.status == 503
        assert "UploadReady" in (await resp.json())["message"]
