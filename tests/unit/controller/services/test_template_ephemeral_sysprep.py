"""ephemeral and sysprep volumes in the launcher pod (controller/services/volumes), and
autoattachVSOCK's device request: an ephemeral volume's claim is mounted read-only where a
claim volume would be (its block device for a block claim), with no size for the launcher
to make a disk; a sysprep volume's ConfigMap or Secret is mounted read-only at
sysprep/<volume>."""

from __future__ import annotations

from controller.services.volumes.claims import Claim, claim_names
from tests.unit.controller.builders import make_vmi
from tests.unit.controller.services.test_template import compute
from tests.unit.controller.services.test_template_volumes import _mount, _pod, _raw, _volume

PRIVATE = "/var/run/kubevirt-private"
EPHEMERAL = {"name": "base", "ephemeral": {"persistentVolumeClaim": {"claimName": "golden"}}}


def _claim(mode: str) -> Claim:
    return Claim(
        name="golden",
        phase="Bound",
        volume_mode=mode,
        request_bytes=2**30,
        capacity_bytes=2**30,
    )


def test_an_ephemeral_claim_is_mounted_read_only_without_a_size() -> None:
    """The claim read-only as a pod volume and a read-only mount at vmi-disks/<volume>;
    no --claim-capacity (the launcher never makes its disk.img); the controller reads
    (and waits for) the claim like any other."""
    raw = _raw(EPHEMERAL)
    pod = _pod(raw, {"golden": _claim("Filesystem")})
    claim = {"claimName": "golden", "readOnly": True}
    assert _volume(pod, "base") == {"name": "base", "persistentVolumeClaim": claim}
    mount = {"name": "base", "mountPath": f"{PRIVATE}/vmi-disks/base", "readOnly": True}
    assert _mount(pod, "base") == mount
    assert "--claim-capacity" not in compute(pod)["args"]
    assert claim_names(make_vmi(raw=raw)) == ("golden",)


def test_an_ephemeral_block_claim_is_a_device() -> None:
    """A block claim: its device in the compute container, no mount."""
    pod = _pod(_raw(EPHEMERAL), {"golden": _claim("Block")})
    devices = compute(pod)["volumeDevices"]
    assert devices == [{"name": "base", "devicePath": "/dev/vmi-disks/base"}]
    assert all(m["name"] != "base" for m in compute(pod)["volumeMounts"])


def test_sysprep_objects_are_mounted_read_only_under_sysprep() -> None:
    """configMap → configMap pod volume, secret → secret pod volume, each mounted
    read-only at sysprep/<volume>."""
    pod = _pod(
        _raw(
            {"name": "win", "sysprep": {"configMap": {"name": "answers"}}},
            {"name": "win2", "sysprep": {"secret": {"name": "secret-answers"}}},
        )
    )
    assert _volume(pod, "win") == {"name": "win", "configMap": {"name": "answers"}}
    assert _volume(pod, "win2") == {"name": "win2", "secret": {"secretName": "secret-answers"}}
    for name in ("win", "win2"):
        mount = {"name": name, "mountPath": f"{PRIVATE}/sysprep/{name}", "readOnly": True}
        assert _mount(pod, name) == mount


def test_autoattach_vsock_requests_the_vhost_vsock_device() -> None:
    """autoattachVSOCK: the compute container requests (and limits) one
    devices.kubevirt.io/vhost-vsock, so only nodes with /dev/vhost-vsock take the pod;
    without it, none."""
    raw = _raw(EPHEMERAL)
    plain = compute(_pod(raw, {"golden": _claim("Filesystem")}))["resources"]
    raw["spec"]["domain"]["devices"]["autoattachVSOCK"] = True
    asked = compute(_pod(raw, {"golden": _claim("Filesystem")}))["resources"]
    for section in ("requests", "limits"):
        assert asked[section]["devices.kubevirt.io/vhost-vsock"] == "1"
        assert "devices.kubevirt.io/vhost-vsock" not in plain[section]
