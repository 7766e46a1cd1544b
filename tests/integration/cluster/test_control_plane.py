"""The local control plane behaves like a real one: it starts from nothing, RBAC is
enforced, watches from a compacted resourceVersion expire with 410 Gone, and a component
that dies is restarted (as systemd or the kubelet restarts it on a real host)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from localkube.cluster import Cluster
from localkube.procs import read_pidfile
from localkube.testing import wait_for

pytestmark = pytest.mark.cluster


async def test_comes_up_from_nothing(kube_cluster: Cluster, kube_api: client.ApiClient) -> None:
    """The session cluster was started from an empty state dir (fresh PKI, etcd, ports):
    every component is healthy, both nodes are Ready, and the controllers work (a new
    namespace gets its default ServiceAccount and kube-root-ca.crt)."""
    statuses = await kube_cluster.status()
    assert [s.name for s in statuses if not s.healthy] == [], statuses
    nodes = (await client.CoreV1Api(kube_api).list_node()).items
    ready = {n.metadata.name: _ready(n) for n in nodes}
    assert ready == {name: "True" for name in kube_cluster.config.nodes}

    core = client.CoreV1Api(kube_api)
    ns = client.V1Namespace(metadata=client.V1ObjectMeta(generate_name="fresh-"))
    name = (await core.create_namespace(ns)).metadata.name
    try:
        await wait_for(
            lambda: core.read_namespaced_service_account("default", name),
            lambda sa: True,
            what="the default ServiceAccount",
        )
        cm = await wait_for(
            lambda: core.read_namespaced_config_map("kube-root-ca.crt", name),
            lambda cm: "ca.crt" in (cm.data or {}),
            what="kube-root-ca.crt",
        )
        assert cm.data["ca.crt"].strip() == kube_cluster.pki.crt("ca").read_text().strip()
    finally:
        await core.delete_namespace(name)


async def test_up_twice_is_harmless(kube_cluster: Cluster) -> None:
    """`up` on a running cluster starts nothing new: every component keeps its pid."""
    before = {s.name: s.pid for s in await kube_cluster.status()}
    await kube_cluster.up()
    after = {s.name: s.pid for s in await kube_cluster.status()}
    assert after == before


async def test_service_account_without_rights_is_denied(
    kube_cluster: Cluster, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    """A ServiceAccount with no RoleBinding authenticates but is forbidden (403) to list
    pods; once a Role granting it is bound, the same request succeeds."""
    core, rbac = client.CoreV1Api(kube_api), client.RbacAuthorizationV1Api(kube_api)
    sa = client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="nobody"))
    await core.create_namespaced_service_account(kube_namespace, sa)
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
    token = (
        await core.create_namespaced_service_account_token("nobody", kube_namespace, request)
    ).status.token

    cfg = client.Configuration(host=kube_api.configuration.host)
    cfg.ssl_ca_cert = str(kube_cluster.pki.crt("ca"))
    cfg.api_key = {"BearerToken": token}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    async with client.ApiClient(cfg) as as_nobody:
        with pytest.raises(ApiException) as denied:
            await client.CoreV1Api(as_nobody).list_namespaced_pod(kube_namespace)
        assert denied.value.status == 403
        assert f"system:serviceaccount:{kube_namespace}:nobody" in str(denied.value.body)

        role = client.V1Role(
            metadata=client.V1ObjectMeta(name="pod-reader"),
            rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["list"])],
        )
        await rbac.create_namespaced_role(kube_namespace, role)
        binding = client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="nobody-reads-pods"),
            role_ref=client.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="Role", name="pod-reader"
            ),
            subjects=[
                client.RbacV1Subject(kind="ServiceAccount", name="nobody", namespace=kube_namespace)
            ],
        )
        await rbac.create_namespaced_role_binding(kube_namespace, binding)
        pods = await wait_for(
            lambda: client.CoreV1Api(as_nobody).list_namespaced_pod(kube_namespace),
            lambda _: True,
            what="list allowed after the RoleBinding",
        )
        assert pods.items == []


async def test_watch_from_compacted_resource_version_gets_410_and_relist_recovers(
    kube_cluster: Cluster, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    """After etcd compacts past a resourceVersion, a watch resumed from it fails with
    410 Gone (Expired); a relist returns the current state and a resourceVersion from
    which a new watch sees later changes. (PodTemplates bypass the apiserver's watch
    cache in localkube, so the watch meets etcd's compaction as it would on a cluster
    whose cache window has moved on.)"""
    core = client.CoreV1Api(kube_api)
    old_rv = await _template_with_history(core, kube_namespace, steps=3)
    current = (await core.list_namespaced_pod_template(kube_namespace)).metadata.resource_version
    await _compact_etcd(kube_cluster, int(current))

    with pytest.raises(ApiException) as expired:
        await _first_event(core, kube_namespace, old_rv)
    assert expired.value.status == 410, expired.value

    relisted = await core.list_namespaced_pod_template(kube_namespace)
    assert [t.metadata.labels["step"] for t in relisted.items] == ["3"]
    await _label(core, kube_namespace, step=4)
    event = await _first_event(core, kube_namespace, relisted.metadata.resource_version)
    assert (event["type"], event["object"].metadata.labels["step"]) == ("MODIFIED", "4")


async def _template_with_history(core: client.CoreV1Api, ns: str, *, steps: int) -> str:
    """Create PodTemplate "pt" and change it ``steps`` times; its first resourceVersion."""
    container = client.V1Container(name="c", image="kubevirt-py/sleeper")
    template = client.V1PodTemplate(
        metadata=client.V1ObjectMeta(name="pt", labels={"step": "0"}),
        template=client.V1PodTemplateSpec(spec=client.V1PodSpec(containers=[container])),
    )
    created = await core.create_namespaced_pod_template(ns, template)
    for step in range(1, steps + 1):
        await _label(core, ns, step=step)
    return str(created.metadata.resource_version)


async def _label(core: client.CoreV1Api, ns: str, *, step: int) -> None:
    await core.patch_namespaced_pod_template(
        "pt", ns, {"metadata": {"labels": {"step": str(step)}}}
    )


async def _first_event(core: client.CoreV1Api, ns: str, resource_version: str) -> Any:
    """The first event of a PodTemplate watch from ``resource_version`` (errors raise)."""
    stream = watch.Watch()
    try:
        async with asyncio.timeout(20):
            async for event in stream.stream(
                core.list_namespaced_pod_template,
                ns,
                resource_version=resource_version,
                timeout_seconds=10,
            ):
                return event
    finally:
        await stream.close()
    raise AssertionError(f"no event from resourceVersion {resource_version} within 10s")


async def _compact_etcd(cluster: Cluster, revision: int) -> None:
    """Physically compact etcd up to ``revision`` through its JSON gateway."""
    url = f"http://127.0.0.1:{cluster.ports.etcd}/v3/kv/compaction"
    async with asyncio.timeout(30), aiohttp.ClientSession() as session:
        resp = await session.post(url, json={"revision": str(revision), "physical": True})
        assert resp.status == 200, await resp.text()


def _ready(node: client.V1Node) -> str:
    return next((c.status for c in node.status.conditions or () if c.type == "Ready"), "absent")


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.parametrize("component", ["kube-apiserver", "kube-scheduler"])
async def test_a_killed_control_plane_component_is_restarted(
    kube_cluster: Cluster, kube_api: client.ApiClient, component: str
) -> None:
    """Each control-plane component runs under localkube.supervise: SIGKILLed, it is
    started again (a new process under the same supervisor), the cluster reports it
    healthy and the API answers again."""
    supervisor = read_pidfile(kube_cluster.paths.pidfile(component))
    assert supervisor is not None
    (before,) = _children(supervisor)
    os.kill(before, signal.SIGKILL)
    after = await wait_for(
        lambda: asyncio.sleep(0, _children(supervisor)),
        lambda kids: len(kids) == 1 and kids[0] != before,
        what=f"{component} started again by its supervisor",
    )
    await wait_for(
        kube_cluster.status,
        lambda statuses: all(s.healthy for s in statuses),
        what="every component healthy again",
    )
    nodes = (await client.CoreV1Api(kube_api).list_node()).items
    assert len(nodes) == len(kube_cluster.config.nodes)
    log = kube_cluster.paths.log(component).read_text(errors="replace")
    assert '"event": "component_exited"' in log and after[0] != before
