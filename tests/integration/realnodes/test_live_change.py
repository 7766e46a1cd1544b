"""Changing the cluster without restarts, on real nodes: the KubeVirt CR is the live
configuration (docs/live-change.md). `kubectl wait kv` works as KubeVirt's user guide
writes it; a feature gate and the migration bandwidth changed in the CR take effect with no
daemon restarting; a bad CR is refused at admission naming the field."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_migration import _last_tick
from tests.integration.realnodes.test_story import _pod_uid, _virtctl, _vmi, _wait, start_demo

pytestmark = pytest.mark.cluster
DAEMONS = "kubevirt.io in (virt-controller, virt-handler)"
HOOKS = "hooks.kubevirt.io/hookSidecars"


def _restarts(k: Kubectl) -> dict[str, int]:
    """Each daemon pod's container restarts, by pod name."""
    items = json.loads(k("get", "pods", "-n", "kubevirt", "-l", DAEMONS, "-o", "json"))["items"]
    return {
        p["metadata"]["name"]: sum(c["restartCount"] for c in p["status"]["containerStatuses"])
        for p in items
    }


def _run(k: Kubectl, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """kubectl, its exit code and stderr kept (refusals are what some tests look at)."""
    argv = [str(k.binary), "--kubeconfig", str(k.kubeconfig), *args]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=180)


def _patch_kv(k: Kubectl, configuration: dict[str, Any], *, check: bool = True) -> str:
    body = json.dumps({"spec": {"configuration": configuration}})
    return k("patch", "kv", "kubevirt", "-n", "kubevirt", "--type=merge", "-p", body, check=check)


@pytest.fixture
def kv_restored(real_stack: Kubectl) -> Iterator[Kubectl]:
    """The KubeVirt CR's configuration as it was, put back after the test."""
    k = real_stack
    before = json.loads(k("get", "kv", "kubevirt", "-n", "kubevirt", "-o", "json"))
    yield k
    spec = {"spec": {"configuration": before["spec"].get("configuration")}}
    # A JSON merge patch cannot drop keys we added unless they are nulled: replace instead.
    k("patch", "kv", "kubevirt", "-n", "kubevirt", "--type=json", "-p",
      json.dumps([{"op": "replace", "path": "/spec/configuration",
                   "value": spec["spec"]["configuration"] or {}}]))  # fmt: skip


def test_kubectl_wait_kv_as_the_user_guide_writes_it(real_stack: Kubectl) -> None:
    """`kubectl -n kubevirt wait kv kubevirt --for condition=Available` returns; the CR is
    Deployed and reports the version it observed."""
    k = real_stack
    k("-n", "kubevirt", "wait", "kv", "kubevirt", "--for", "condition=Available",
      "--timeout=180s")  # fmt: skip
    kv = json.loads(k("get", "kv", "kubevirt", "-n", "kubevirt", "-o", "json"))
    assert kv["status"]["phase"] == "Deployed", kv["status"]
    assert kv["status"]["observedKubeVirtVersion"].startswith("v"), kv["status"]
    degraded = [c for c in kv["status"]["conditions"] if c["type"] == "Degraded"]
    assert degraded and degraded[0]["status"] == "False", kv["status"]


def test_a_bad_kubevirt_cr_is_refused_naming_the_field(kv_restored: Kubectl) -> None:
    """A bandwidth that is no quantity is refused by admission, naming the field; the CR
    keeps its configuration."""
    k = kv_restored
    body = {"spec": {"configuration": {"migrations": {"bandwidthPerMigration": "fast"}}}}
    done = _run(k, "patch", "kv", "kubevirt", "-n", "kubevirt", "--type=merge", "-p",
                json.dumps(body))  # fmt: skip
    assert done.returncode != 0
    assert "spec.configuration.migrations.bandwidthPerMigration" in done.stderr, done.stderr
    kv = json.loads(k("get", "kv", "kubevirt", "-n", "kubevirt", "-o", "json"))
    assert "fast" not in json.dumps(kv["spec"])


def _dry_create(k: Kubectl, body: str) -> subprocess.CompletedProcess[str]:
    return _run(k, "create", "--dry-run=server", "-f", "-", stdin=body)


def _sidecar_vmi(ns: str) -> str:
    vmi = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {
            "name": "hooked",
            "namespace": ns,
            "annotations": {HOOKS: '[{"image": "registry.local/hook:v1"}]'},
        },
        "spec": {"domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}}},
    }
    return json.dumps(vmi)


def test_a_feature_gate_changed_in_the_cr_takes_effect_without_restarts(
    kv_restored: Kubectl, real_namespace: str
) -> None:
    """With gate Sidecar off, a VMI naming hook sidecars is refused as KubeVirt refuses it;
    once the CR turns the gate on, admission answers for the gate being on (sidecars are not
    supported here), and no daemon restarted for it."""
    k, ns = kv_restored, real_namespace
    restarts = _restarts(k)
    _patch_kv(k, {"developerConfiguration": {"featureGates": []}})
    off = _wait(
        lambda: "feature gate is not enabled" in (r := _dry_create(k, _sidecar_vmi(ns))).stderr and r,
        60, "the refusal for the gate being off",
    )  # fmt: skip
    assert f"metadata.annotations.{HOOKS}" in off.stderr, off.stderr
    _patch_kv(k, {"developerConfiguration": {"featureGates": ["Sidecar"]}})
    on = _wait(
        lambda: "hook sidecars are not supported" in (r := _dry_create(k, _sidecar_vmi(ns))).stderr and r,
        60, "the refusal for the gate being on",
    )  # fmt: skip
    assert on.returncode != 0
    assert _restarts(k) == restarts


def _handler_lines(k: Kubectl, event: str) -> list[dict[str, Any]]:
    out = k("logs", "-n", "kubevirt", "-l", "kubevirt.io=virt-handler", "--tail=-1")
    found = []
    for line in out.splitlines():
        if event in line:
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def test_the_migration_bandwidth_changed_in_the_cr_is_used(
    kv_restored: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """bandwidthPerMigration set in the running cluster's CR is the bandwidth the source
    handler hands the launcher for the next migration, which succeeds; no daemon restarted."""
    k, ns = kv_restored, real_namespace
    restarts = _restarts(k)
    _patch_kv(k, {"migrations": {"bandwidthPerMigration": "48Mi", "completionTimeoutPerGiB": 200}})
    vmi = start_demo(k, ns)
    source, _ = _pod_uid(vmi)
    done = _virtctl(real_cluster.kubeconfig, ns, "migrate", "demo", "--wait", "--timeout", "240")
    assert done.returncode == 0, done.stderr
    _wait(lambda: _vmi(k, ns).get("status", {}).get("nodeName") not in (None, source), 120,
          "the VMI on the other node")  # fmt: skip
    lines = [
        x for x in _handler_lines(k, "migration_source_starting") if x.get("vmi") == f"{ns}/demo"
    ]
    assert lines, "the source handler logged no migration start"
    assert lines[-1]["bandwidth_mib"] == 48 and lines[-1]["timeout_seconds"] == 200, lines[-1]
    assert _restarts(k) == restarts


def test_a_migration_policy_selecting_the_vmi_sets_its_bandwidth(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A MigrationPolicy whose namespace selector matches the VMI's namespace is named in
    the VMI's migrationState, and its bandwidthPerMigration is what the source handler hands
    the launcher; the migration succeeds."""
    k, ns = real_stack, real_namespace
    k("label", "namespace", ns, f"live-change-test={ns}")
    policy = {
        "apiVersion": "migrations.kubevirt.io/v1alpha1",
        "kind": "MigrationPolicy",
        "metadata": {"name": f"slow-{ns}"},
        "spec": {
            "selectors": {"namespaceSelector": {"live-change-test": ns}},
            "bandwidthPerMigration": "24Mi",
        },
    }
    k("apply", "-f", "-", stdin=json.dumps(policy))
    try:
        vmi = start_demo(k, ns)
        source, _ = _pod_uid(vmi)
        done = _virtctl(real_cluster.kubeconfig, ns, "migrate", "demo", "--wait", "--timeout",
                        "240")  # fmt: skip
        assert done.returncode == 0, done.stderr
        moved = _wait(
            lambda: (
                (v := _vmi(k, ns)).get("status", {}).get("nodeName") not in (None, source) and v
            ),
            120,
            "the VMI on the other node",
        )
        assert moved["status"]["migrationState"]["migrationPolicyName"] == f"slow-{ns}"
        lines = [
            x
            for x in _handler_lines(k, "migration_source_starting")
            if x.get("vmi") == f"{ns}/demo"
        ]
        assert lines and lines[-1]["bandwidth_mib"] == 24, lines
        assert lines[-1]["policy"] == f"slow-{ns}"
    finally:
        k("delete", "migrationpolicy", f"slow-{ns}", "--wait=false", check=False)


def _vm_condition(k: Kubectl, ns: str, kind: str) -> dict[str, Any]:
    vm = json.loads(k("get", "vm", "demo", "-n", ns, "-o", "json"))
    found = [c for c in vm.get("status", {}).get("conditions", []) if c["type"] == kind]
    return found[0] if found else {}


def test_template_edits_of_a_running_vm(real_stack: Kubectl, real_namespace: str) -> None:
    """With LiveUpdate: tolerations added to the running VM's template reach its VMI (same
    uid) with no RestartRequired; a change of a field that is not live-updatable (the grace
    period) sets RestartRequired naming it; reverting it clears the condition."""
    k, ns = real_stack, real_namespace
    vmi = start_demo(k, ns)
    uid = vmi["metadata"]["uid"]
    tolerations = [{"key": "live-change", "operator": "Exists", "effect": "NoSchedule"}]
    k("patch", "vm", "demo", "-n", ns, "--type=merge", "-p",
      json.dumps({"spec": {"template": {"spec": {"tolerations": tolerations}}}}))  # fmt: skip
    _wait(lambda: _vmi(k, ns).get("spec", {}).get("tolerations") == tolerations, 60,
          "the tolerations on the running VMI", lambda: _vmi(k, ns).get("spec"))  # fmt: skip
    assert _vmi(k, ns)["metadata"]["uid"] == uid
    assert not _vm_condition(k, ns, "RestartRequired")

    k("patch", "vm", "demo", "-n", ns, "--type=merge", "-p",
      json.dumps({"spec": {"template": {"spec": {"terminationGracePeriodSeconds": 5}}}}))  # fmt: skip
    condition = _wait(lambda: _vm_condition(k, ns, "RestartRequired"), 60, "RestartRequired")
    assert condition["status"] == "True"
    assert "spec.terminationGracePeriodSeconds" in condition["message"], condition
    assert _vmi(k, ns)["metadata"]["uid"] == uid

    k("patch", "vm", "demo", "-n", ns, "--type=merge", "-p",
      json.dumps({"spec": {"template": {"spec": {"terminationGracePeriodSeconds": 30}}}}))  # fmt: skip
    _wait(lambda: not _vm_condition(k, ns, "RestartRequired"), 60, "RestartRequired cleared")


LAUNCHER = "registry.local/kubevirt-py/virt-launcher"


def _tag_on_nodes(cluster: Cluster, source: str, target: str) -> None:
    """`target` as another name of `source` in each node's containerd (a "new" image)."""
    for node in cluster.config.nodes:
        sock = cluster.config.nodes_dir / node / "containerd" / "containerd.sock"
        argv = ["/usr/bin/ctr", "--address", str(sock), "-n", "k8s.io", "images", "tag",
                "--force", source, target]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr


def _launcher_image(k: Kubectl, ns: str, vmi: dict[str, Any]) -> str | None:
    node = vmi.get("status", {}).get("nodeName")
    items = json.loads(
        k(
            "get",
            "pods",
            "-n",
            ns,
            "-l",
            f"kubevirt.io/created-by={vmi['metadata']['uid']}",
            "-o",
            "json",
        )
    )["items"]
    for p in items:
        if p["spec"].get("nodeName") == node and p["status"].get("phase") == "Running":
            return str(p["spec"]["containers"][0]["image"])
    return None


def test_a_new_launcher_image_moves_running_vms_onto_it(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """The controller re-deployed with a new launcher image tag (an upgrade of the
    manifests): the running VM is live-migrated into a launcher of the new image by the
    workload updater, same VMI uid, its guest still ticking; kubevirt_vmi_number_of_outdated
    and the outdated label go once it moved."""
    k, ns = real_stack, real_namespace
    vmi = start_demo(k, ns)
    uid = vmi["metadata"]["uid"]
    source, source_pod = _pod_uid(vmi)
    _wait(lambda: _last_tick(real_cluster, source, source_pod) > 2, 180, "guest ticks")
    _tag_on_nodes(real_cluster, f"{LAUNCHER}:dev", f"{LAUNCHER}:v2")
    deployment = ("deployment/virt-controller", "-n", "kubevirt")
    k("set", "env", *deployment, f"VIRT_CONTROLLER_LAUNCHER_IMAGE={LAUNCHER}:v2")
    try:
        k("rollout", "status", *deployment, "--timeout=180s")
        moved = _wait(
            lambda: _launcher_image(k, ns, v := _vmi(k, ns)) == f"{LAUNCHER}:v2" and v,
            300, "the VMI in a launcher of the new image", lambda: _vmi(k, ns).get("status"),
        )  # fmt: skip
        assert moved["metadata"]["uid"] == uid
        assert moved["status"]["phase"] == "Running"
        target, target_pod = _pod_uid(moved)
        _wait(lambda: _last_tick(real_cluster, target, target_pod) > 0, 120,
              "ticks on the new launcher's console")  # fmt: skip
        migrations = json.loads(k("get", "vmim", "-n", ns, "-o", "json"))["items"]
        assert any("kubevirt.io/workloadUpdateMigration" in m["metadata"].get("annotations", {})
                   for m in migrations), migrations  # fmt: skip
        _wait(lambda: "kubevirt.io/outdatedLauncherImage" not in
              _vmi(k, ns)["metadata"].get("labels", {}), 60, "the outdated label gone")  # fmt: skip
    finally:
        k("set", "env", *deployment, f"VIRT_CONTROLLER_LAUNCHER_IMAGE={LAUNCHER}:dev")
        k("rollout", "status", *deployment, "--timeout=180s", check=False)
