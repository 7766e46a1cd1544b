"""The actions API through the real kube-apiserver: aggregation, RBAC, forwarding, console."""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from localkube.testing import wait_for
from shared.actions import ALL_ACTIONS, TOP_LEVEL
from shared.wire.launcher_api import Method
from tests.integration.subresources.conftest import Kubectl, Ran, ServiceAccount
from tests.integration.subresources.stack import (
    CONSOLE_GREETING,
    GUEST_INFO,
    NO_AGENT_VMI,
    PENDING_VMI,
    RUNNING_VMI,
    Stack,
)

GROUP_PATH = "/apis/subresources.kubevirt.io/v1"
Session = tuple[aiohttp.ClientSession, str]


def vmi_path(stack: Stack, action: str, name: str = RUNNING_VMI) -> str:
    ns = stack.config.namespace
    return f"{GROUP_PATH}/namespaces/{ns}/virtualmachineinstances/{name}/{action}"


async def put_raw(kubectl: Kubectl, path: str, kubeconfig: Path | None = None) -> Ran:
    """`kubectl replace --raw` (a PUT) with an empty JSON body."""
    return await kubectl("replace", "--raw", path, "-f", "-", stdin="{}", kubeconfig=kubeconfig)


async def bind(kubectl: Kubectl, sa: ServiceAccount, role: str) -> None:
    ran = await kubectl(
        "create", "rolebinding", f"{sa.name}-{role.rsplit(':', maxsplit=1)[-1]}", "-n", sa.namespace,
        f"--clusterrole={role}", f"--serviceaccount={sa.namespace}:{sa.name}",
    )  # fmt: skip
    assert ran.code == 0, ran.stderr


async def test_discovery_through_kube_apiserver(stack: Stack, kubectl: Kubectl) -> None:
    """kube-apiserver serves our APIResourceList: every action with its verb."""
    ran = await kubectl("get", "--raw", GROUP_PATH)
    assert ran.code == 0, ran.stderr
    verbs = {r["name"]: r["verbs"] for r in json.loads(ran.stdout)["resources"]}
    wanted = {f"{spec.resource}/{spec.action}": [spec.verb] for spec in ALL_ACTIONS}
    assert verbs == wanted | {name: [verb] for name, verb in TOP_LEVEL.items()}
    # Aggregated discovery (what kubectl api-resources reads) merges our group without error.
    listed = await kubectl("api-resources")
    assert listed.code == 0, listed.stderr
    assert "subresources.kubevirt.io" not in listed.stderr


async def test_any_user_reads_the_version(
    stack: Stack, kubectl: Kubectl, service_account: ServiceAccount
) -> None:
    """kubevirt.io:default lets every authenticated user ask the version (virtctl version)."""
    ran = await kubectl(
        "get", "--raw", f"{GROUP_PATH}/version", kubeconfig=service_account.kubeconfig
    )
    assert ran.code == 0, ran.stderr
    assert json.loads(ran.stdout)["gitVersion"].startswith("v")


async def test_admin_pauses_with_kubectl(stack: Stack, kubectl: Kubectl) -> None:
    """PUT pause as the admin reaches the handler's target; our review saw the admin."""
    ran = await put_raw(kubectl, vmi_path(stack, "pause"))
    assert ran.code == 0, ran.stderr
    ns = stack.config.namespace
    assert (ns, RUNNING_VMI, Method.PAUSE) in stack.target.commands
    assert stack.authorizer is not None
    user, attrs, decision = stack.authorizer.reviews[-1]
    assert user.name == "kubernetes-admin"
    assert "system:masters" in user.groups
    assert (attrs.verb, attrs.subresource, attrs.namespace, attrs.name) == (
        "update",
        "pause",
        ns,
        RUNNING_VMI,
    )
    assert decision.allowed


async def test_guestosinfo_round_trips_json(stack: Stack, kubectl: Kubectl) -> None:
    """GET guestosinfo returns the launcher's JSON unchanged."""
    ran = await kubectl("get", "--raw", vmi_path(stack, "guestosinfo"))
    assert ran.code == 0, ran.stderr
    assert json.loads(ran.stdout) == GUEST_INFO


async def test_service_account_needs_the_edit_role(
    stack: Stack, kubectl: Kubectl, service_account: ServiceAccount
) -> None:
    """Without RBAC a ServiceAccount is refused (403 naming the subresource); bound to
    kubevirt.io:edit in the namespace, it may unpause, and our review allowed it too."""
    sa, path = service_account, vmi_path(stack, "unpause")
    refused = await put_raw(kubectl, path, sa.kubeconfig)
    assert refused.code != 0
    assert "forbidden" in refused.stderr.lower()
    assert '"virtualmachineinstances/unpause"' in refused.stderr
    assert (sa.namespace, RUNNING_VMI, Method.UNPAUSE) not in stack.target.commands

    await bind(kubectl, sa, "kubevirt.io:edit")
    # kube-apiserver's RBAC authorizer learns of the binding through an informer.
    await wait_for(
        lambda: put_raw(kubectl, path, sa.kubeconfig),
        lambda ran: ran.code == 0,
        what="the RoleBinding to take effect",
        timeout=30,
    )
    assert (sa.namespace, RUNNING_VMI, Method.UNPAUSE) in stack.target.commands
    assert stack.authorizer is not None
    reviews = [r for r in stack.authorizer.reviews if r[0].name == sa.user]
    assert reviews and reviews[-1][2].allowed
    assert f"system:serviceaccounts:{sa.namespace}" in reviews[-1][0].groups


async def test_view_role_reads_but_cannot_act(
    stack: Stack, kubectl: Kubectl, service_account: ServiceAccount
) -> None:
    """kubevirt.io:view may read guestosinfo but not soft-reboot."""
    sa = service_account
    await bind(kubectl, sa, "kubevirt.io:view")
    read = vmi_path(stack, "guestosinfo")
    ran = await wait_for(
        lambda: kubectl("get", "--raw", read, kubeconfig=sa.kubeconfig),
        lambda ran: ran.code == 0,
        what="the RoleBinding to take effect",
        timeout=30,
    )
    assert json.loads(ran.stdout) == GUEST_INFO
    refused = await put_raw(kubectl, vmi_path(stack, "softreboot"), sa.kubeconfig)
    assert refused.code != 0
    assert '"virtualmachineinstances/softreboot"' in refused.stderr


@pytest.mark.parametrize(
    ("call", "code", "reason"),
    [
        pytest.param(("PUT", "pause", "absent"), 404, "NotFound", id="vmi-not-found"),
        pytest.param(("PUT", "pause", PENDING_VMI), 409, "Conflict", id="not-running"),
        pytest.param(("GET", "userlist", NO_AGENT_VMI), 502, "InternalError", id="launcher-error"),
        pytest.param(("PUT", "explode", RUNNING_VMI), 404, "NotFound", id="unknown-action"),
        pytest.param(("GET", "pause", RUNNING_VMI), 405, "MethodNotAllowed", id="wrong-method"),
    ],
)
async def test_failures_are_status_objects(
    stack: Stack, apiserver: Session, call: tuple[str, str, str], code: int, reason: str
) -> None:
    """Our Status bodies come back through kube-apiserver unchanged."""
    session, server = apiserver
    method, action, vmi = call
    async with session.request(method, server + vmi_path(stack, action, vmi), json={}) as resp:
        body: dict[str, Any] = await resp.json()
    assert resp.status == code
    assert (body["kind"], body["code"], body["reason"]) == ("Status", code, reason)
    if vmi == NO_AGENT_VMI:
        assert body["details"]["causes"][0]["reason"] == "agent_not_connected"


async def test_our_review_is_a_second_gate(stack: Stack, service_account: ServiceAccount) -> None:
    """Called directly with the front-proxy certificate, the API asks kube-apiserver with a
    SubjectAccessReview and refuses a user without RBAC: 403 Status naming the denial."""
    cluster = stack.config.cluster
    tls = ssl.create_default_context(cafile=stack.config.pki.ca[0])
    tls.load_cert_chain(
        cluster.pki.crt("front-proxy-client"), cluster.pki.key("front-proxy-client")
    )
    url = f"https://{stack.config.host_ip}:{stack.api_port}{vmi_path(stack, 'pause')}"
    forwarded = len(stack.target.commands)
    headers = [
        ("X-Remote-User", service_account.user),
        ("X-Remote-Group", "system:serviceaccounts"),
        ("X-Remote-Group", "system:authenticated"),
    ]
    async with aiohttp.ClientSession() as session, session.put(url, ssl=tls, headers=headers) as r:
        body = await r.json()
    assert r.status == 403
    assert body["reason"] == "Forbidden"
    assert f'User "{service_account.user}" cannot update resource' in body["message"]
    assert '"virtualmachineinstances/pause"' in body["message"]
    assert len(stack.target.commands) == forwarded


async def test_console_relays_bytes_end_to_end(stack: Stack, apiserver: Session) -> None:
    """kube-apiserver upgrades the console to a websocket and relays binary frames both
    ways through the subresource API and the handler to the console socket."""
    session, server = apiserver
    url = server.replace("https://", "wss://") + vmi_path(stack, "console")
    async with session.ws_connect(url, protocols=("plain.kubevirt.io",)) as ws:
        greeting = await ws.receive(timeout=30)
        assert (greeting.type, greeting.data) == (aiohttp.WSMsgType.BINARY, CONSOLE_GREETING)
        await ws.send_bytes(b"echo kubevirt-py\n")
        echoed = await ws.receive(timeout=30)
        assert echoed.data == b"ECHO KUBEVIRT-PY\n"
