"""VirtualMachineInstanceReplicaSets on real nodes: a set of 3 reaches 3 Running members,
`kubectl scale` takes it to 1 and to 4, and a member whose launcher is killed is replaced
(a burst of 10 during which the leading controller is killed: test_chaos_load.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from localkube.deploy import Kubectl
from tests.integration.realnodes.test_metrics import Samples, _pod_ip, _until_scraped
from tests.integration.realnodes.test_story import _wait

pytestmark = pytest.mark.cluster
GUEST = "registry.local/kubevirt-py/tiny-guest:v1"


def replica_set(ns: str, replicas: int) -> dict[str, Any]:
    """A set of tiny guests (128 MiB, kernel boot from the test image, pod network)."""
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceReplicaSet",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"fleet": "web"}},
            "template": {
                "metadata": {"labels": {"fleet": "web"}},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "domain": {
                        "cpu": {"cores": 1},
                        "memory": {"guest": "128Mi"},
                        "resources": {"requests": {"memory": "128Mi"}},
                        "firmware": {
                            "kernelBoot": {
                                "kernelArgs": "console=ttyS0 panic=-1 quiet",
                                "container": {
                                    "image": GUEST,
                                    "kernelPath": "/boot/vmlinuz",
                                    "initrdPath": "/boot/initrd.img",
                                },
                            }
                        },
                        "devices": {
                            "disks": [{"name": "containerdisk", "disk": {"bus": "virtio"}}],
                            "interfaces": [{"name": "default", "masquerade": {}}],
                        },
                    },
                    "networks": [{"name": "default", "pod": {}}],
                    "volumes": [{"name": "containerdisk", "containerDisk": {"image": GUEST}}],
                },
            },
        },
    }


@pytest.fixture
def fleet_ns(real_stack: Kubectl, real_namespace: str) -> Iterator[str]:
    """A namespace whose replica sets (and so their VMIs) are deleted first at the end."""
    yield real_namespace
    real_stack("delete", "vmirs", "--all", "-n", real_namespace, "--wait=true",
               "--timeout=120s", check=False)  # fmt: skip


def members(k: Kubectl, ns: str) -> list[dict[str, Any]]:
    """The set's VMIs that are not being deleted."""
    out = k("get", "vmi", "-n", ns, "-l", "fleet=web", "-o", "json")
    return [v for v in json.loads(out)["items"] if "deletionTimestamp" not in v["metadata"]]


def running(k: Kubectl, ns: str) -> list[dict[str, Any]]:
    return [v for v in members(k, ns) if v.get("status", {}).get("phase") == "Running"]


def rs_status(k: Kubectl, ns: str) -> dict[str, Any]:
    status: dict[str, Any] = json.loads(k("get", "vmirs", "web", "-n", ns, "-o", "json")).get(
        "status", {}
    )
    return status


def settle(k: Kubectl, ns: str, n: int, *, timeout: float = 600) -> list[dict[str, Any]]:
    """Wait for exactly n Running members (and no other member) and status.replicas n."""

    def done() -> list[dict[str, Any]] | None:
        live, up = members(k, ns), running(k, ns)
        ok = len(live) == n and len(up) == n and rs_status(k, ns).get("replicas", 0) == n
        return up if ok else None

    def show() -> Any:
        return [(v["metadata"]["name"], v.get("status", {}).get("phase")) for v in members(k, ns)]

    result: list[dict[str, Any]] = _wait(done, timeout, f"{n} Running members", show, interval=2)
    return result


def leader_pod(k: Kubectl) -> str:
    """The controller replica holding the Lease (its identity is its pod name)."""
    out = k("get", "lease", "virt-controller-py", "-n", "kubevirt", "-o", "json")
    holder: str = json.loads(out)["spec"]["holderIdentity"]
    return holder


def test_replica_set_scales_and_replaces_members(real_stack: Kubectl, fleet_ns: str) -> None:
    """3 members reach Running with the scale subresource's selector in status; `kubectl
    scale` to 1 leaves one, to 4 makes four; a member whose launcher pod is killed is
    deleted by the set and a new member takes its place."""
    k, ns = real_stack, fleet_ns
    k("apply", "-f", "-", stdin=json.dumps(replica_set(ns, 3)))
    settle(k, ns, 3)
    status = rs_status(k, ns)
    assert status["labelSelector"] == "fleet=web" and status["readyReplicas"] == 3
    scale = json.loads(k("get", "--raw", f"/apis/kubevirt.io/v1/namespaces/{ns}/"
                         "virtualmachineinstancereplicasets/web/scale"))  # fmt: skip
    assert scale["status"] == {"replicas": 3, "selector": "fleet=web"}

    k("scale", "vmirs", "web", "-n", ns, "--replicas=1")
    [survivor] = settle(k, ns, 1)
    k("scale", "vmirs", "web", "-n", ns, "--replicas=4")
    settle(k, ns, 4)
    assert survivor["metadata"]["name"] in {v["metadata"]["name"] for v in members(k, ns)}

    victim = survivor["metadata"]["name"]
    uid = survivor["metadata"]["uid"]
    k("delete", "pods", "-n", ns, "-l", f"kubevirt.io/created-by={uid}",
      "--grace-period=0", "--force", "--wait=false")  # fmt: skip
    after = settle(k, ns, 4)
    assert victim not in {v["metadata"]["name"] for v in after}
    reasons = {
        e["reason"]
        for e in json.loads(k("get", "events", "-n", ns, "-o", "json"))["items"]
        if e["involvedObject"].get("kind") == "VirtualMachineInstanceReplicaSet"
    }
    assert {"SuccessfulCreate", "SuccessfulDelete"} <= reasons


def probed_set(ns: str, name: str, probe: dict[str, Any]) -> dict[str, Any]:
    """A set of one tiny guest with this readinessProbe, selected by fleet=<name>."""
    body = replica_set(ns, 1)
    body["metadata"]["name"] = name
    body["spec"]["selector"] = {"matchLabels": {"fleet": name}}
    template = body["spec"]["template"]
    template["metadata"]["labels"] = {"fleet": name}
    template["spec"]["readinessProbe"] = probe
    return body


def vmi_of(k: Kubectl, ns: str, label: str) -> dict[str, Any]:
    out = k("get", "vmi", "-n", ns, "-l", label, "-o", "json")
    items = [v for v in json.loads(out)["items"] if "deletionTimestamp" not in v["metadata"]]
    return items[0] if len(items) == 1 else {}


def condition(vmi: dict[str, Any], kind: str) -> str:
    conds = vmi.get("status", {}).get("conditions", [])
    return next((c["status"] for c in conds if c["type"] == kind), "")


def test_readiness_decides_ready_and_what_the_set_counts(
    real_stack: Kubectl, fleet_ns: str
) -> None:
    """A member whose guest agent answers (guestAgentPing readiness) becomes Ready and is
    counted in readyReplicas; a member whose probed port serves nothing (httpGet on 8080)
    runs but stays Ready=False and is not counted."""
    k, ns = real_stack, fleet_ns
    ping = {"guestAgentPing": {}, "periodSeconds": 2, "timeoutSeconds": 2}
    closed = {"httpGet": {"port": 8080, "path": "/"}, "periodSeconds": 2}
    k("apply", "-f", "-", stdin=json.dumps(probed_set(ns, "pinged", ping)))
    k("apply", "-f", "-", stdin=json.dumps(probed_set(ns, "closed", closed)))

    def counted(name: str) -> dict[str, Any]:
        out = k("get", "vmirs", name, "-n", ns, "-o", "json")
        status: dict[str, Any] = json.loads(out).get("status", {})
        return status

    _wait(lambda: counted("pinged").get("readyReplicas") == 1, 600, "the pinged member Ready",
          lambda: vmi_of(k, ns, "fleet=pinged").get("status"), interval=2)  # fmt: skip
    assert condition(vmi_of(k, ns, "fleet=pinged"), "Ready") == "True"
    _wait(lambda: vmi_of(k, ns, "fleet=closed").get("status", {}).get("phase") == "Running",
          600, "the closed member Running", interval=2)  # fmt: skip
    # Ready=False is the pod's answer: wait until the kubelet has probed and said so.
    _wait(lambda: condition(vmi_of(k, ns, "fleet=closed"), "Ready") == "False", 120,
          "the closed member's Ready=False", lambda: vmi_of(k, ns, "fleet=closed").get("status"),
          interval=2)  # fmt: skip
    status = counted("closed")
    assert status.get("replicas") == 1 and status.get("readyReplicas", 0) == 0


def test_a_failing_liveness_probe_restarts_the_vm(real_stack: Kubectl, fleet_ns: str) -> None:
    """A VM (runStrategy Always) whose liveness probe asks port 8080, where the guest
    serves nothing: the kubelet kills the launcher, the VMI fails and the VM starts a new
    one (another UID)."""
    k, ns = real_stack, fleet_ns
    template = replica_set(ns, 1)["spec"]["template"]
    template["spec"]["livenessProbe"] = {
        "httpGet": {"port": 8080, "path": "/"},
        "initialDelaySeconds": 5,
        "periodSeconds": 3,
        "failureThreshold": 2,
    }
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "doomed", "namespace": ns},
        "spec": {"runStrategy": "Always", "template": template},
    }
    k("apply", "-f", "-", stdin=json.dumps(vm))
    first = _wait(lambda: vmi_of(k, ns, "fleet=web").get("metadata", {}).get("uid"), 300,
                  "the VM's first VMI")  # fmt: skip

    def replaced() -> bool:
        uid = vmi_of(k, ns, "fleet=web").get("metadata", {}).get("uid")
        return bool(uid) and uid != first

    _wait(replaced, 600, "a new VMI after the liveness probe failed",
          lambda: vmi_of(k, ns, "fleet=web").get("status"), interval=2)  # fmt: skip
    events = json.loads(k("get", "events", "-n", ns, "-o", "json"))["items"]
    assert any(e["reason"] == "Unhealthy" and "Liveness" in e["message"] for e in events)
    k("delete", "vm", "doomed", "-n", ns, "--wait=true", "--timeout=120s")


SCRATCH = {"source": {"blank": {}}, "storage": {"resources": {"requests": {"storage": "16Mi"}}}}


def vm_pool(ns: str, replicas: int) -> dict[str, Any]:
    """A pool of tiny guests (VMs pool-<n>, runStrategy Always), scaled in from the top;
    each VM has its own blank DataVolume `scratch-<n>` (a dataVolumeTemplate) as vdb."""
    template = replica_set(ns, 1)["spec"]["template"]
    template["metadata"]["labels"] = {"fleet": "pool"}
    spec = template["spec"]
    spec["domain"]["devices"]["disks"].append({"name": "scratch", "disk": {"bus": "virtio"}})
    spec["volumes"].append({"name": "scratch", "dataVolume": {"name": "scratch"}})
    return {
        "apiVersion": "pool.kubevirt.io/v1beta1",
        "kind": "VirtualMachinePool",
        "metadata": {"name": "pool", "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"fleet": "pool"}},
            "scaleInStrategy": {  # selectors selecting every VM: DescendingOrder decides
                "proactive": {
                    "selectionPolicy": {
                        "sortPolicy": "DescendingOrder",
                        "selectors": {"labelSelector": {"matchLabels": {"fleet": "pool"}}},
                    }
                }
            },
            "maxUnavailable": 1,  # the rollout restarts one VMI at a time
            "autohealing": {"minFailingToStartDuration": "10m"},
            "virtualMachineTemplate": {
                "metadata": {"labels": {"fleet": "pool"}},
                "spec": {
                    "runStrategy": "Always",
                    "dataVolumeTemplates": [{"metadata": {"name": "scratch"}, "spec": SCRATCH}],
                    "template": template,
                },
            },
        },
    }


def pool_vmis(k: Kubectl, ns: str) -> dict[str, dict[str, Any]]:
    """The pool's Running VMIs (not being deleted), by name."""
    out = k("get", "vmi", "-n", ns, "-l", "fleet=pool", "-o", "json")
    return {
        v["metadata"]["name"]: v
        for v in json.loads(out)["items"]
        if "deletionTimestamp" not in v["metadata"]
        and v.get("status", {}).get("phase") == "Running"
    }


def pool_vms(k: Kubectl, ns: str) -> list[str]:
    out = k("get", "vm", "-n", ns, "-l", "kubevirt.io/vmpool=pool", "-o", "json")
    return sorted(v["metadata"]["name"] for v in json.loads(out)["items"]
                  if "deletionTimestamp" not in v["metadata"])  # fmt: skip


def scratch(k: Kubectl, ns: str) -> dict[str, dict[str, Any]]:
    """The scratch-<n> DataVolumes and claims: {name: {dv, claim}} (either may be missing)."""
    found: dict[str, dict[str, Any]] = {}
    for kind, key in (("dv", "dv"), ("pvc", "claim")):
        for item in json.loads(k("get", kind, "-n", ns, "-o", "json"))["items"]:
            name = item["metadata"]["name"]
            if name.startswith("scratch-"):
                found.setdefault(name, {})[key] = item
    return found


def check_own_claims(k: Kubectl, ns: str, names: set[str]) -> dict[str, str]:
    """Every pool VM has its own Succeeded DataVolume scratch-<n>, controlled by VM
    pool-<n>, its claim Bound, and its VMI's volume names it; exactly these exist.
    Returns the DataVolumes' UIDs by name."""
    vmis, disks = pool_vmis(k, ns), scratch(k, ns)
    want = {name.replace("pool-", "scratch-") for name in names}
    assert set(disks) == want, sorted(disks)
    for name in names:
        dv, claim = disks[name.replace("pool-", "scratch-")].values()
        [owner] = [r for r in dv["metadata"]["ownerReferences"] if r.get("controller")]
        assert (owner["kind"], owner["name"]) == ("VirtualMachine", name), owner
        assert dv["status"]["phase"] == "Succeeded" and claim["status"]["phase"] == "Bound"
        volumes = {v["name"]: v for v in vmis[name]["spec"]["volumes"]}
        assert volumes["scratch"]["dataVolume"]["name"] == dv["metadata"]["name"]
    return {n: d["dv"]["metadata"]["uid"] for n, d in disks.items()}


def check_fleet_series(k: Kubectl, ns: str) -> None:
    """A controller serves the pool's desired and ready replicas (2), its two Succeeded
    DataVolumes, and the launcher pods it saw scheduled (docs/monitoring.md)."""
    pool = {"namespace": ns, "name": "pool"}

    def ready(s: Samples) -> bool:
        return any(v == 2 for lb, v in s.get("kubevirt_vmpool_ready_replicas", [])
                   if pool.items() <= lb.items())  # fmt: skip

    samples = _until_scraped(_pod_ip(k, "virt-controller"), ready, "the pool's series")
    assert (pool, 2.0) in [(lb, v) for lb, v in samples["kubevirt_vmpool_replicas"]]
    dvs = {lb["phase"]: v for lb, v in samples["kubevirt_datavolumes"] if lb["namespace"] == ns}
    assert dvs == {"Succeeded": 2.0}, dvs
    assert samples.get("kubevirt_vmi_launcher_pods_scheduled_total"), sorted(samples)


def owner_of(k: Kubectl, ns: str, name: str) -> str | None:
    """The name of DataVolume `name`'s controller (None: it has none)."""
    refs = scratch(k, ns)[name]["dv"]["metadata"].get("ownerReferences") or []
    return next((r["name"] for r in refs if r.get("controller")), None)


def check_state_preserved(
    k: Kubectl, ns: str, dvs: dict[str, str], running: Callable[[set[str]], Any]
) -> None:
    """statePreservation Offline on the pool (pool-0, pool-1 and pool-2 running, their
    DataVolumes' UIDs `dvs`): scaled to 2, pool-2 goes but scratch-2 and its claim stay
    (same UIDs) with no controller; scaled to 3, pool-2 is made again on them and owns
    scratch-2 again. statePreservation is then removed (Disabled again)."""
    claims = {n: d["claim"]["metadata"]["uid"] for n, d in scratch(k, ns).items()}
    path = "/spec/scaleInStrategy/proactive/statePreservation"
    keep = [{"op": "add", "path": path, "value": "Offline"}]
    k("patch", "vmpool", "pool", "-n", ns, "--type=json", "-p", json.dumps(keep))
    k("scale", "vmpool", "pool", "-n", ns, "--replicas=2")

    def gone() -> bool:  # pool-2 deleted, not just being deleted (its index free again)
        vms = json.loads(k("get", "vm", "-n", ns, "-l", "kubevirt.io/vmpool=pool", "-o", "json"))
        return running({"pool-0", "pool-1"})() and len(vms["items"]) == 2

    _wait(gone, 600, "pool-2 scaled in", lambda: scratch(k, ns), interval=2)
    kept = scratch(k, ns)
    assert {n: d["dv"]["metadata"]["uid"] for n, d in kept.items()} == dvs, kept
    assert {n: d["claim"]["metadata"]["uid"] for n, d in kept.items()} == claims, kept
    assert owner_of(k, ns, "scratch-2") is None and owner_of(k, ns, "scratch-1") == "pool-1"
    k("scale", "vmpool", "pool", "-n", ns, "--replicas=3")
    everyone = {"pool-0", "pool-1", "pool-2"}
    _wait(lambda: running(everyone)() and owner_of(k, ns, "scratch-2") == "pool-2",
          600, "pool-2 back on scratch-2", lambda: scratch(k, ns), interval=2)  # fmt: skip
    assert check_own_claims(k, ns, everyone) == dvs
    again = {n: d["claim"]["metadata"]["uid"] for n, d in scratch(k, ns).items()}
    assert again == claims, again
    drop = [{"op": "remove", "path": path}]
    k("patch", "vmpool", "pool", "-n", ns, "--type=json", "-p", json.dumps(drop))


def test_pool_scales_and_rolls_a_template_change(real_stack: Kubectl, fleet_ns: str) -> None:
    """A pool of 2 runs VMs pool-0 and pool-1, each with its own claim (DataVolume
    scratch-<n> from the pool's dataVolumeTemplate, owned by its VM); `kubectl scale
    vmpool` to 3 adds pool-2 with scratch-2; with statePreservation Offline, 3 → 2
    keeps scratch-2 and 2 → 3 gives it back to pool-2 made again (check_state_preserved);
    then without it (KubeVirt's default), to 1 removes pool-2 and pool-1 (DescendingOrder)
    and their DataVolumes and claims with them (the taken-back scratch-2 too) while pool-0
    keeps scratch-0. Before that, a template change (a new label on the VMI template)
    restarts pool-0's and pool-1's VMIs with the label, each on its own claim, one at a
    time (maxUnavailable 1: never both without a Running VMI). The controller's metrics
    show the pool's replicas and its DataVolumes' phase."""
    k, ns = real_stack, fleet_ns
    k("apply", "-f", "-", stdin=json.dumps(vm_pool(ns, 2)))

    def running(names: set[str]) -> Any:
        return lambda: pool_vms(k, ns) == sorted(names) and set(pool_vmis(k, ns)) == names

    def show() -> Any:
        return (
            pool_vms(k, ns),
            list(pool_vmis(k, ns)),
            {n: d.get("dv", {}).get("status", {}).get("phase") for n, d in scratch(k, ns).items()},
        )

    _wait(running({"pool-0", "pool-1"}), 600, "pool-0 and pool-1 Running", show, interval=2)
    first = check_own_claims(k, ns, {"pool-0", "pool-1"})
    check_fleet_series(k, ns)
    before = {n: v["metadata"]["uid"] for n, v in pool_vmis(k, ns).items()}
    patch = [{"op": "add", "path": "/spec/virtualMachineTemplate/spec/template/metadata/labels/rev",
              "value": "two"}]  # fmt: skip
    k("patch", "vmpool", "pool", "-n", ns, "--type=json", "-p", json.dumps(patch))
    down = [0]  # the most pool VMs seen without a Running VMI at once during the rollout

    def rolled() -> bool:
        vmis = pool_vmis(k, ns)
        down[0] = max(down[0], len(before) - len(vmis))
        return all(
            name in vmis and vmis[name]["metadata"]["uid"] != uid
            and vmis[name]["metadata"].get("labels", {}).get("rev") == "two"
            for name, uid in before.items()
        )  # fmt: skip

    _wait(rolled, 600, "pool-0 and pool-1 restarted with the new template", show, interval=0.5)
    assert down[0] == 1, down  # maxUnavailable 1: one at a time, never both
    assert check_own_claims(k, ns, {"pool-0", "pool-1"}) == first
    k("scale", "vmpool", "pool", "-n", ns, "--replicas=3")
    _wait(running({"pool-0", "pool-1", "pool-2"}), 600, "pool-2 Running", show, interval=2)
    third = check_own_claims(k, ns, {"pool-0", "pool-1", "pool-2"})
    check_state_preserved(k, ns, third, running)
    k("scale", "vmpool", "pool", "-n", ns, "--replicas=1")
    _wait(lambda: running({"pool-0"})() and set(scratch(k, ns)) == {"scratch-0"}, 600,
          "only pool-0 and scratch-0", show, interval=2)  # fmt: skip
    assert check_own_claims(k, ns, {"pool-0"}) == {"scratch-0": first["scratch-0"]}
    status = json.loads(k("get", "vmpool", "pool", "-n", ns, "-o", "json"))["status"]
    assert status["replicas"] == 1 and status["labelSelector"] == "fleet=pool"
    k("delete", "vmpool", "pool", "-n", ns, "--wait=true", "--timeout=120s")
