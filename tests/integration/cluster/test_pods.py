"""Pods run through the node agent as a kubelet would run them: scheduled by the real
scheduler, created by the real Deployment/DaemonSet controllers, with kubelet-like
env, volumes, status, restart policies and graceful deletion."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from localkube.cluster import Cluster
from localkube.nodeagent.refs import pod_ip
from localkube.procs import pid_alive
from localkube.testing import pod_logs, wait_for

pytestmark = pytest.mark.cluster
GRACE = 4
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
FIELDS = {
    "POD_NAME": "metadata.name",
    "POD_NAMESPACE": "metadata.namespace",
    "POD_UID": "metadata.uid",
    "NODE_NAME": "spec.nodeName",
    "POD_IP": "status.podIP",
}
# Records what the container sees in $OUT (a hostPath volume), then ignores SIGTERM
# (noting when it came) so that only SIGKILL at the end of the grace period stops it.
PROBE = f"""
import json, os, pathlib, signal, time
out = pathlib.Path(os.environ["OUT"]); sa = pathlib.Path({SA_DIR!r})
mounted = any(line.split()[4] == str(out) for line in open("/proc/self/mountinfo"))
state = {{"env": {{k: os.environ.get(k) for k in {[*FIELDS, "GREETING"]!r}}}, "pid": os.getpid(),
          "sa": sorted(p.name for p in sa.iterdir()), "sa_ns": (sa / "namespace").read_text(),
          "mounted": mounted}}
(out / "state.tmp").write_text(json.dumps(state)); (out / "state.tmp").rename(out / "state.json")
signal.signal(signal.SIGTERM, lambda *_: (out / "sigterm").write_text(str(time.time())))
while True:
    time.sleep(1)
"""


def _probe_deployment(out_dir: Path, mount_path: Path) -> Any:
    env = [{"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}} for k, v in FIELDS.items()]
    env.append({"name": "GREETING", "value": "hello-$(POD_NAME)"})
    env.append({"name": "OUT", "value": str(mount_path)})
    pod_spec = {
        "terminationGracePeriodSeconds": GRACE,
        "containers": [
            {
                "name": "probe",
                "image": "kubevirt-py/python:latest",
                "command": ["python", "-c", PROBE],
                "env": env,
                "volumeMounts": [{"name": "out", "mountPath": str(mount_path)}],
            }
        ],
        "volumes": [{"name": "out", "hostPath": {"path": str(out_dir), "type": "Directory"}}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "probe"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "probe"}},
            "template": {"metadata": {"labels": {"app": "probe"}}, "spec": pod_spec},
        },
    }


def _pod_summary(pod: client.V1Pod) -> Any:
    return {
        "phase": pod.status.phase,
        "node": pod.spec.node_name,
        "containers": [s.to_dict() for s in pod.status.container_statuses or ()],
    }


async def _only_pod(core: client.CoreV1Api, ns: str, selector: str) -> client.V1Pod:
    pods = [
        p
        for p in (await core.list_namespaced_pod(ns, label_selector=selector)).items
        if p.metadata.deletion_timestamp is None
    ]
    assert len(pods) == 1, [p.metadata.name for p in pods]
    return pods[0]


async def test_deployment_pod_runs_with_downward_env_and_honours_grace_period(
    kube_cluster: Cluster, kube_api: client.ApiClient, kube_namespace: str, tmp_path: Path
) -> None:
    """A Deployment's pod is scheduled and run by a node agent: Running and Ready with
    its own loopback podIP (127.x.y.z from its UID), its downward-API env (name, namespace, uid, node, pod IP) and $(VAR)
    expansion right, the service-account token mounted, its volume mounted in a mount
    namespace of its own. Deleting it sends SIGTERM and, as the process ignores it,
    SIGKILL after terminationGracePeriodSeconds; only then is the Pod object gone, with
    its process dead and its pod directory removed."""
    core, apps = client.CoreV1Api(kube_api), client.AppsV1Api(kube_api)
    out, mount_path = tmp_path / "out", tmp_path / "mnt"  # mnt: made by the pod's prologue
    out.mkdir()
    await apps.create_namespaced_deployment(kube_namespace, _probe_deployment(out, mount_path))
    pod = await wait_for(
        lambda: _only_pod(core, kube_namespace, "app=probe"),
        lambda p: _is_ready(p) and (out / "state.json").exists(),
        what="the probe pod Running and Ready",
        timeout=60,
        show=_pod_summary,
    )
    assert pod.status.phase == "Running"
    assert pod.status.pod_ip == pod_ip(pod.metadata.uid) != "127.0.0.1"
    assert pod.status.container_statuses[0].state.running is not None
    state = json.loads((out / "state.json").read_text())
    meta = pod.metadata
    assert state["env"] == {
        "POD_NAME": meta.name,
        "POD_NAMESPACE": kube_namespace,
        "POD_UID": meta.uid,
        "NODE_NAME": pod.spec.node_name,
        "POD_IP": pod.status.pod_ip,
        "GREETING": f"hello-{meta.name}",
    }, pod_logs(kube_cluster.config, pod)
    assert state["sa"] == ["ca.crt", "namespace", "token"]
    assert state["sa_ns"] == kube_namespace
    assert state["mounted"] is True
    assert str(mount_path) not in Path("/proc/self/mountinfo").read_text()  # private

    elapsed = await _delete_and_time(core, pod, sigterm_file=out / "sigterm")
    # The behaviour is "not killed before the grace period ends"; how soon after is not.
    assert elapsed >= GRACE - 0.5, elapsed
    assert not pid_alive(state["pid"])
    assert not (kube_cluster.config.nodes_dir / pod.spec.node_name / "pods" / meta.uid).exists()


async def _delete_and_time(
    core: client.CoreV1Api, pod: client.V1Pod, *, sigterm_file: Path
) -> float:
    """Delete the pod, check SIGTERM arrives at once; seconds until the object is gone."""
    name, ns = pod.metadata.name, pod.metadata.namespace
    started = time.monotonic()
    await core.delete_namespaced_pod(name, ns)
    await wait_for(
        lambda: _read(sigterm_file), lambda s: s is not None, what="SIGTERM", timeout=GRACE
    )
    await wait_for(
        lambda: _gone(core, name, ns),
        lambda gone: gone,
        what="the Pod object deleted",
        timeout=GRACE + 20,
        interval=0.2,
    )
    return time.monotonic() - started


def _is_ready(pod: client.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())


async def test_daemonset_runs_a_pod_on_every_node(
    kube_cluster: Cluster, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    """The DaemonSet controller creates one pod per node (with node affinity); the
    scheduler binds each to its node and each node agent runs it."""
    apps = client.AppsV1Api(kube_api)
    ds: Any = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "everywhere"},
        "spec": {
            "selector": {"matchLabels": {"app": "everywhere"}},
            "template": {
                "metadata": {"labels": {"app": "everywhere"}},
                "spec": {
                    "terminationGracePeriodSeconds": 2,
                    "containers": [{"name": "sleep", "image": "kubevirt-py/sleeper"}],
                },
            },
        },
    }
    await apps.create_namespaced_daemon_set(kube_namespace, ds)
    status = await wait_for(
        lambda: apps.read_namespaced_daemon_set_status("everywhere", kube_namespace),
        lambda d: d.status.number_ready == len(kube_cluster.config.nodes),
        what="a ready pod per node",
        timeout=60,
        show=lambda d: d.status,
    )
    assert status.status.desired_number_scheduled == len(kube_cluster.config.nodes)
    pods = (await client.CoreV1Api(kube_api).list_namespaced_pod(kube_namespace)).items
    assert sorted(p.spec.node_name for p in pods) == sorted(kube_cluster.config.nodes)


async def test_unknown_image_waits_with_err_image_pull(
    kube_api: client.ApiClient, kube_namespace: str
) -> None:
    """An image with no local entry point leaves the pod Pending, its container waiting
    with reason ErrImagePull and a message naming the image, as a failed pull does."""
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod(
        kube_namespace, _pod("nginx", "docker.io/library/nginx:1.27", restart="Always")
    )
    pod = await wait_for(
        lambda: core.read_namespaced_pod("nginx", kube_namespace),
        lambda p: _waiting_reason(p) == "ErrImagePull",
        what="ErrImagePull",
        show=_pod_summary,
    )
    assert pod.status.phase == "Pending"
    assert "docker.io/library/nginx:1.27" in pod.status.container_statuses[0].state.waiting.message


@pytest.mark.parametrize(
    ("restart", "code", "phase"),
    [
        pytest.param("Never", 3, "Failed", id="never-exit-3-fails"),
        pytest.param("OnFailure", 0, "Succeeded", id="onfailure-exit-0-succeeds"),
        pytest.param("Never", 0, "Succeeded", id="never-exit-0-succeeds"),
    ],
)
async def test_exit_codes_decide_the_phase(
    kube_api: client.ApiClient, kube_namespace: str, restart: str, code: int, phase: str
) -> None:
    """A container's exit code and the pod's restartPolicy give the terminal phase, and
    the exit code is reported in the container's terminated state."""
    core = client.CoreV1Api(kube_api)
    body = _pod(
        "exits",
        "kubevirt-py/python",
        restart=restart,
        command=["python", "-c", f"raise SystemExit({code})"],
    )
    await core.create_namespaced_pod(kube_namespace, body)
    pod = await wait_for(
        lambda: core.read_namespaced_pod("exits", kube_namespace),
        lambda p: p.status.phase in ("Succeeded", "Failed"),
        what="a terminal phase",
        show=_pod_summary,
    )
    assert pod.status.phase == phase
    assert pod.status.container_statuses[0].state.terminated.exit_code == code


async def test_restart_policy_always_restarts_with_backoff(
    kube_api: client.ApiClient, kube_namespace: str
) -> None:
    """With restartPolicy Always a container that exits is restarted: restartCount grows,
    lastState keeps the previous exit code, and the pod stays Running."""
    core = client.CoreV1Api(kube_api)
    body = _pod(
        "crashes",
        "kubevirt-py/python",
        restart="Always",
        command=["python", "-c", "raise SystemExit(7)"],
    )
    await core.create_namespaced_pod(kube_namespace, body)
    pod = await wait_for(
        lambda: core.read_namespaced_pod("crashes", kube_namespace),
        lambda p: (
            bool(p.status.container_statuses)
            and p.status.container_statuses[0].restart_count >= 1
            and p.status.container_statuses[0].last_state.terminated is not None
        ),
        what="a restart",
        timeout=60,
        show=_pod_summary,
    )
    assert pod.status.phase == "Running"
    assert pod.status.container_statuses[0].last_state.terminated.exit_code == 7


def _pod(name: str, image: str, *, restart: str, command: list[str] | None = None) -> Any:
    container: dict[str, Any] = {"name": "main", "image": image}
    if command:
        container["command"] = command
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 2,
            "containers": [container],
        },
    }


def _waiting_reason(pod: client.V1Pod) -> str | None:
    for st in pod.status.container_statuses or ():
        if st.state.waiting is not None:
            return str(st.state.waiting.reason)
    return None


async def _read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


async def _gone(core: client.CoreV1Api, name: str, ns: str) -> bool:
    try:
        await core.read_namespaced_pod(name, ns)
    except ApiException as e:
        if e.status == 404:
            return True
        raise
    return False
