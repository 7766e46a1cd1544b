"""DataVolume decisions: claim, worker pod, phases as CDI shows them, bad input Failed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from controller.datavolume.logic import ClaimView, WorkerPod, plan_datavolume
from controller.datavolume.pods import SCRIPT, claim_body, worker_pod
from shared.model.datavolume import DataVolume, DataVolumePhase
from shared.model.datavolume_spec import target

NOW = "2026-01-01T00:00:00Z"
STORAGE = {"resources": {"requests": {"storage": "64Mi"}}}


def dv(source: dict[str, Any], *, phase: str | None = None, **spec: Any) -> DataVolume:
    raw: dict[str, Any] = {
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataVolume",
        "metadata": {"name": "disk", "namespace": "ns", "uid": "dv-uid"},
        "spec": {"source": source, **(spec or {"storage": STORAGE})},
    }
    if phase:
        raw["status"] = {"phase": phase}
    return DataVolume.from_dict(raw)


REGISTRY = {"registry": {"url": "docker://registry.local/kubevirt-py/tiny-guest:v1"}}
CLAIM = ClaimView(name="disk", phase="Bound", volume_mode="Filesystem", owned=True)


def pod(raw_status: dict[str, Any]) -> WorkerPod:
    return WorkerPod.from_dict({"metadata": {"name": "importer-disk"}, "status": raw_status})


def test_new_datavolume_makes_its_claim_with_cdi_defaults() -> None:
    """No claim yet: Pending, and the claim is made from `storage` with ReadWriteOnce and
    Filesystem filled in, owned by the DataVolume, with the importer pod at once (a clone
    waits a sync: the CSI driver may fill the claim)."""
    d = dv(REGISTRY)
    plan = plan_datavolume(d, claim=None, pod=None, now=NOW)
    assert plan.create_claim and plan.status.phase == DataVolumePhase.PENDING
    assert plan.create_pod
    clone = plan_datavolume(dv({"pvc": {"name": "golden"}}), claim=None, pod=None, now=NOW)
    assert clone.create_claim and not clone.create_pod
    body = claim_body(d, target(d))
    assert body["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert body["spec"]["volumeMode"] == "Filesystem"
    assert body["metadata"]["ownerReferences"][0]["uid"] == "dv-uid"


def test_phases_follow_the_importer_pod() -> None:
    """ImportScheduled until the pod runs, ImportInProgress while it runs, Succeeded with
    100.0% when it exits 0 (the pod is then deleted)."""
    d = dv(REGISTRY)
    assert plan_datavolume(d, claim=CLAIM, pod=None, now=NOW).create_pod
    scheduled = plan_datavolume(d, claim=CLAIM, pod=pod({"phase": "Pending"}), now=NOW)
    assert scheduled.status.phase == DataVolumePhase.IMPORT_SCHEDULED
    running = plan_datavolume(d, claim=CLAIM, pod=pod({"phase": "Running"}), now=NOW)
    assert running.status.phase == DataVolumePhase.IMPORT_IN_PROGRESS
    assert running.status.progress == "N/A"
    done = plan_datavolume(d, claim=CLAIM, pod=pod({"phase": "Succeeded"}), now=NOW)
    assert done.status.phase == DataVolumePhase.SUCCEEDED and done.delete_pod
    assert done.status.progress == "100.0%"
    ready = done.status.condition("Ready")
    assert ready is not None and ready.status == "True"


def test_clone_phases() -> None:
    """A pvc source goes through CloneScheduled and CloneInProgress."""
    d = dv({"pvc": {"name": "golden"}})
    assert plan_datavolume(d, claim=CLAIM, pod=None, now=NOW).status.phase == "CloneScheduled"
    running = plan_datavolume(d, claim=CLAIM, pod=pod({"phase": "Running"}), now=NOW)
    assert running.status.phase == DataVolumePhase.CLONE_IN_PROGRESS


def test_failed_importer_fails_the_datavolume_with_its_message() -> None:
    """The importer's termination message is the Ready condition's message."""
    status = {
        "phase": "Failed",
        "containerStatuses": [
            {"name": "importer", "state": {"terminated": {"exitCode": 1, "message": "404"}}}
        ],
    }
    plan = plan_datavolume(dv(REGISTRY), claim=CLAIM, pod=pod(status), now=NOW)
    failed = DataVolume.from_dict({"status": plan.status.to_dict()})
    assert failed.failure() == "404"


def test_image_that_cannot_be_pulled_fails() -> None:
    """An init container waiting on ErrImagePull fails the DataVolume, naming it."""
    status = {
        "phase": "Pending",
        "initContainerStatuses": [
            {"name": "source-image", "state": {"waiting": {"reason": "ErrImagePull",
                                                           "message": "not found"}}}
        ],
    }  # fmt: skip
    plan = plan_datavolume(dv(REGISTRY), claim=CLAIM, pod=pod(status), now=NOW)
    assert plan.status.phase == DataVolumePhase.FAILED
    assert "ErrImagePull: not found" in (plan.status.conditions[1].message or "")


@pytest.mark.parametrize(
    ("source", "spec", "fragment"),
    [
        ({}, None, "spec.source: exactly one source"),
        ({"s3": {"url": "s3://x"}}, None, "spec.source.s3: not supported"),
        ({"http": {"url": "ftp://x"}}, None, "spec.source.http.url"),
        ({"registry": {"url": "quay.io/x"}}, None, "spec.source.registry.url"),
        ({"blank": {}}, {"storage": {}}, "spec.storage.resources.requests.storage: required"),
        ({"blank": {}}, {"pvc": STORAGE, "storage": STORAGE}, "not both"),
    ],
)
def test_bad_spec_fails_naming_the_field(
    source: dict[str, Any], spec: dict[str, Any] | None, fragment: str
) -> None:
    """A DataVolume kubevirt-py cannot act on ends Failed, the message naming the field."""
    d = dv(source, **spec) if spec else dv(source)
    plan = plan_datavolume(d, claim=None, pod=None, now=NOW)
    assert plan.status.phase == DataVolumePhase.FAILED and not plan.create_claim
    assert fragment in (plan.status.conditions[1].message or "")


def test_final_datavolume_is_left_alone() -> None:
    """Succeeded imports once: no claim or pod is made again."""
    plan = plan_datavolume(dv(REGISTRY, phase="Succeeded"), claim=None, pod=None, now=NOW)
    assert not (plan.create_claim or plan.create_pod)


def test_importer_pods() -> None:
    """registry with pullMethod node: busybox and the source image as init containers;
    http: the URL as the source argument; pvc: the source claim mounted read-only; block:
    the device."""
    reg = dv({"registry": {**REGISTRY["registry"], "pullMethod": "node"}})
    body = worker_pod(reg, target(reg), image="launcher", pull_policy="IfNotPresent")
    inits = body["spec"]["initContainers"]
    assert inits[1]["image"] == "registry.local/kubevirt-py/tiny-guest:v1"
    assert body["spec"]["containers"][0]["args"][:3] == ["registry", "/data/disk.img", "67108864"]
    http = dv({"http": {"url": "http://198.18.0.9/disk.qcow2"}})
    body = worker_pod(http, target(http), image="launcher", pull_policy="IfNotPresent")
    assert body["spec"]["containers"][0]["args"][-1] == "http://198.18.0.9/disk.qcow2"
    clone = dv({"pvc": {"name": "golden"}}, storage={**STORAGE, "volumeMode": "Block"})
    body = worker_pod(clone, target(clone), image="launcher", pull_policy="IfNotPresent")
    assert {
        "name": "source",
        "persistentVolumeClaim": {"claimName": "golden", "readOnly": True},
    } in (body["spec"]["volumes"])
    assert (
        body["spec"]["containers"][0]["volumeDevices"][0]["devicePath"] == "/dev/cdi-block-volume"
    )
    assert "A larger PVC is required" in SCRIPT


def test_upload_phases_follow_the_upload_server() -> None:
    """An upload source makes cdi-upload-<dv>: UploadScheduled until the server is ready
    (running alone is not enough), UploadReady while it waits, Succeeded when it exited 0."""
    d = dv({"upload": {}})
    assert plan_datavolume(d, claim=None, pod=None, now=NOW).create_claim
    first = plan_datavolume(d, claim=CLAIM, pod=None, now=NOW)
    assert first.create_pod and first.status.phase == DataVolumePhase.UPLOAD_SCHEDULED
    running = plan_datavolume(d, claim=CLAIM, pod=pod({"phase": "Running"}), now=NOW)
    assert running.status.phase == DataVolumePhase.UPLOAD_SCHEDULED
    ready_status = {"phase": "Running", "containerStatuses": [{"ready": True}]}
    ready = plan_datavolume(d, claim=CLAIM, pod=pod(ready_status), now=NOW)
    assert ready.status.phase == DataVolumePhase.UPLOAD_READY
    done = plan_datavolume(d, claim=CLAIM, pod=pod({"phase": "Succeeded"}), now=NOW)
    assert done.status.phase == DataVolumePhase.SUCCEEDED and done.delete_pod


def test_upload_pod_runs_the_import_script_behind_the_server() -> None:
    """The upload server (loopback only) gets the importer script after `--`, pointed at
    the uploaded file; an exec probe on its /healthz makes the pod ready."""
    d = dv({"upload": {}}, storage={**STORAGE, "volumeMode": "Block"})
    body = worker_pod(d, target(d), image="launcher", pull_policy="IfNotPresent")
    assert body["metadata"]["name"] == "cdi-upload-disk"
    (container,) = body["spec"]["containers"]
    assert container["command"][0] == "virt-uploadserver-py"
    assert container["command"][-1] == "--"
    assert container["args"][-4:] == [
        "upload",
        "/dev/cdi-block-volume",
        "67108864",
        "/scratch/disk",
    ]
    assert "127.0.0.1:8080/healthz" in " ".join(container["readinessProbe"]["exec"]["command"])


def test_csi_clone_needs_no_pod() -> None:
    """A claim made with a dataSource is cloned by the CSI driver: CloneInProgress until
    it is Bound, then Succeeded; no worker pod."""
    d = dv({"pvc": {"name": "golden"}})
    pending = ClaimView(name="disk", phase="Pending", volume_mode="Filesystem", owned=True,
                        csi_clone=True)  # fmt: skip
    plan = plan_datavolume(d, claim=pending, pod=None, now=NOW)
    assert plan.status.phase == DataVolumePhase.CLONE_IN_PROGRESS and not plan.create_pod
    bound = ClaimView(name="disk", phase="Bound", volume_mode="Filesystem", owned=True,
                      csi_clone=True)  # fmt: skip
    plan = plan_datavolume(d, claim=bound, pod=None, now=NOW)
    assert plan.status.phase == DataVolumePhase.SUCCEEDED and not plan.create_pod


def test_importer_exited_zero_is_succeeded_before_the_pod_phase() -> None:
    """The importer container terminated with exit code 0 while the kubelet still shows the
    pod Running (it tears the pod down first): Succeeded at once and the pod deleted; a
    container still running, or one that exited non-zero, is not success."""
    d = dv({"http": {"url": "http://images/disk.qcow2"}})
    exited = {"state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
    done = plan_datavolume(
        d, claim=CLAIM, pod=pod({"phase": "Running", "containerStatuses": [exited]}), now=NOW
    )
    assert done.status.phase == DataVolumePhase.SUCCEEDED and done.delete_pod
    running: dict[str, Any] = {"state": {"running": {}}}
    both = pod({"phase": "Running", "containerStatuses": [exited, running]})
    assert plan_datavolume(d, claim=CLAIM, pod=both, now=NOW).status.phase == (
        DataVolumePhase.IMPORT_IN_PROGRESS
    )
    failed = {"state": {"terminated": {"exitCode": 1, "message": "unable to fetch"}}}
    bad = plan_datavolume(
        d, claim=CLAIM, pod=pod({"phase": "Running", "containerStatuses": [failed]}), now=NOW
    )
    assert bad.status.phase == DataVolumePhase.FAILED


def test_import_script_marks_its_steps_and_reports_them_on_success(tmp_path: Path) -> None:
    """The importer script (run here with the host's busybox and qemu-img on a pvc-style
    source) writes the disk and ends with its step marks (node uptime) as the termination
    message: start, probed, converted, done, in order."""
    src, dest, term = tmp_path / "src.qcow2", tmp_path / "disk.img", tmp_path / "term"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(src), "1M"], check=True)
    env = {"TERMINATION_LOG": str(term), "PATH": os.environ["PATH"]}
    argv = ["busybox", "sh", "-c", SCRIPT, "importer", "pvc", str(dest), "2097152", str(src)]
    subprocess.run(argv, env=env, check=True, capture_output=True, timeout=60)
    assert dest.stat().st_size == 2097152
    message = term.read_text().strip()
    assert message.startswith("importer steps (uptime s):")
    marks = [item.split("=") for item in message.split(":", 1)[1].split()]
    assert [name for name, _ in marks] == ["start", "probed", "converted", "done"]
    times = [float(at) for _, at in marks]
    assert times == sorted(times)
