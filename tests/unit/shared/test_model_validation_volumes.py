"""VMI validation rules for volumes and cloud-init, each reported at its path."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from shared.model import VirtualMachineInstance
from shared.model.validation import DISK_BUS_LIMITS
from tests.unit.shared._validation_support import (
    CI,
    DELETE,
    DISKS,
    KI,
    VOLS,
    load,
    messages_at,
    vmi_errors,
)

RULES = [
    # volumes
    pytest.param(
        {
            f"{DISKS}[2].name": "other",
            f"{VOLS}[4]": {"name": "other", "emptyDisk": {"capacity": "1Gi"}},
        },
        f"{VOLS}[2].name",
        "volume 'scratch' is not used",
        id="volume-unused",
    ),
    pytest.param(
        {
            f"{DISKS}[1].name": "other",
            f"{VOLS}[4]": {"name": "other", "emptyDisk": {"capacity": "1Gi"}},
        },
        f"{VOLS}[1].name",
        "cloud-init volume 'cloudinitdisk'",
        id="cloud-init-volume-needs-disk",
    ),
    pytest.param(
        {f"{VOLS}[2].emptyDisk": DELETE},
        f"{VOLS}[2]",
        "must set a volume source",
        id="volume-no-source",
    ),
    pytest.param(
        {f"{VOLS}[2].configMap": {"name": "cm"}},
        f"{VOLS}[2]",
        "exactly one volume source (found emptyDisk, configMap)",
        id="volume-two-sources",
    ),
    pytest.param(
        {f"{VOLS}[2].name": "Bad.Name"}, f"{VOLS}[2].name", "DNS-1123", id="volume-name-invalid"
    ),
    pytest.param(
        {f"{VOLS}[4]": {"name": "scratch", "emptyDisk": {"capacity": "1Gi"}}},
        f"{VOLS}[4].name",
        "duplicate name 'scratch'",
        id="volume-name-duplicate",
    ),
    pytest.param(
        {f"{VOLS}[3].hostDisk.path": "disks/data.img"},
        f"{VOLS}[3].hostDisk.path",
        "absolute",
        id="host-disk-relative",
    ),
    pytest.param(
        {f"{VOLS}[3].hostDisk.path": "/var/lib/../../etc/shadow"},
        f"{VOLS}[3].hostDisk.path",
        "'..'",
        id="host-disk-dotdot",
    ),
    pytest.param(
        {f"{VOLS}[3].hostDisk.path": "/var//lib/x.img"},
        f"{VOLS}[3].hostDisk.path",
        "normalised",
        id="host-disk-double-slash",
    ),
    pytest.param(
        {f"{VOLS}[3].hostDisk.path": "/var/./x.img"},
        f"{VOLS}[3].hostDisk.path",
        "normalised",
        id="host-disk-dot",
    ),
    pytest.param(
        {f"{VOLS}[3].hostDisk.path": "/var/x/"},
        f"{VOLS}[3].hostDisk.path",
        "normalised",
        id="host-disk-trailing-slash",
    ),
    pytest.param(
        {f"{VOLS}[3].hostDisk.path": "/var/x\x00.img"},
        f"{VOLS}[3].hostDisk.path",
        "control",
        id="host-disk-nul",
    ),
    pytest.param(
        {f"{VOLS}[3].hostDisk.path": "/var/x\n.img"},
        f"{VOLS}[3].hostDisk.path",
        "control",
        id="host-disk-newline",
    ),
    pytest.param(
        {f"{VOLS}[3].hostDisk.path": DELETE},
        f"{VOLS}[3].hostDisk.path",
        "required",
        id="host-disk-path-missing",
    ),
    pytest.param(
        {f"{VOLS}[3].hostDisk.capacity": DELETE},
        f"{VOLS}[3].hostDisk.capacity",
        "is required",
        id="host-disk-create-needs-capacity",
    ),
    pytest.param(
        {f"{VOLS}[3].hostDisk.type": DELETE},
        f"{VOLS}[3].hostDisk.type",
        "required",
        id="host-disk-type-missing",
    ),
    pytest.param(
        {f"{VOLS}[3].hostDisk.path": "/disk.img"},
        f"{VOLS}[3].hostDisk.path",
        "must be in a directory below /",
        id="host-disk-at-the-root",
    ),
    pytest.param(
        {f"{VOLS}[3].hostDisk.path": "/etc/kubernetes/disk.img"},
        f"{VOLS}[3].hostDisk.path",
        "must not be under /etc",
        id="host-disk-in-etc",
    ),
    pytest.param(
        {f"{VOLS}[3].hostDisk.path": "/var/lib/kubelet/pods/x.img"},
        f"{VOLS}[3].hostDisk.path",
        "must not be under /var/lib/kubelet",
        id="host-disk-in-kubelet",
    ),
    pytest.param(
        {f"{VOLS}[3]": {"name": "data", "dataVolume": {"name": "Not_A_Name"}}},
        f"{VOLS}[3].dataVolume.name",
        "",
        id="data-volume-bad-name",
    ),
    pytest.param(
        {f"{VOLS}[3]": {"name": "data", "ephemeral": {}}},
        f"{VOLS}[3].ephemeral.persistentVolumeClaim",
        "is required",
        id="ephemeral-without-claim",
    ),
    pytest.param(
        {f"{VOLS}[3]": {"name": "data", "ephemeral": {"persistentVolumeClaim": {}}}},
        f"{VOLS}[3].ephemeral.persistentVolumeClaim.claimName",
        "is required",
        id="ephemeral-claim-no-name",
    ),
    pytest.param(
        {
            f"{VOLS}[3]": {
                "name": "data",
                "ephemeral": {"persistentVolumeClaim": {"claimName": "Bad_Name"}},
            }
        },
        f"{VOLS}[3].ephemeral.persistentVolumeClaim.claimName",
        "DNS-1123 subdomain",
        id="ephemeral-claim-bad-name",
    ),
    pytest.param(
        {
            f"{VOLS}[3]": {
                "name": "data",
                "ephemeral": {"persistentVolumeClaim": {"claimName": "c", "hotpluggable": True}},
            }
        },
        f"{VOLS}[3].ephemeral.persistentVolumeClaim.hotpluggable",
        "cannot be hotplugged",
        id="ephemeral-hotpluggable",
    ),
    pytest.param(
        {f"{VOLS}[3]": {"name": "data", "sysprep": {}}},
        f"{VOLS}[3].sysprep",
        "exactly one of configMap, secret",
        id="sysprep-without-object",
    ),
    pytest.param(
        {
            f"{VOLS}[3]": {
                "name": "data",
                "sysprep": {"configMap": {"name": "a"}, "secret": {"name": "b"}},
            }
        },
        f"{VOLS}[3].sysprep",
        "exactly one of configMap, secret",
        id="sysprep-both-objects",
    ),
    pytest.param(
        {f"{VOLS}[3]": {"name": "data", "sysprep": {"secret": {}}}},
        f"{VOLS}[3].sysprep.secret.name",
        "is required",
        id="sysprep-secret-no-name",
    ),
    pytest.param(
        {f"{VOLS}[3]": {"name": "data", "sysprep": {"configMap": {"name": "Bad_Name"}}}},
        f"{VOLS}[3].sysprep.configMap.name",
        "DNS-1123 subdomain",
        id="sysprep-config-map-bad-name",
    ),
    pytest.param(
        {f"{VOLS}[3]": {"name": "data", "configMap": {}}},
        f"{VOLS}[3].configMap.name",
        "is required",
        id="config-map-no-name",
    ),
    pytest.param(
        {f"{VOLS}[3]": {"name": "data", "secret": {"secretName": "Bad_Name"}}},
        f"{VOLS}[3].secret.secretName",
        "DNS-1123 subdomain",
        id="secret-bad-name",
    ),
    pytest.param(
        {f"{VOLS}[3]": {"name": "data", "configMap": {"name": "cm", "volumeLabel": "x" * 33}}},
        f"{VOLS}[3].configMap.volumeLabel",
        "1 to 32 printable characters",
        id="config-map-label-too-long",
    ),
    pytest.param(
        {f"{VOLS}[3]": {"name": "data", "serviceAccount": {}}},
        f"{VOLS}[3].serviceAccount.serviceAccountName",
        "is required",
        id="service-account-no-name",
    ),
    pytest.param(
        {
            f"{VOLS}[2]": {"name": "scratch", "serviceAccount": {"serviceAccountName": "a"}},
            f"{VOLS}[3]": {"name": "data", "serviceAccount": {"serviceAccountName": "b"}},
        },
        f"{VOLS}[3].serviceAccount",
        "only one serviceAccount volume",
        id="two-service-accounts",
    ),
    pytest.param(
        {
            f"{VOLS}[3]": {
                "name": "data",
                "downwardAPI": {
                    "fields": [{"path": "../up", "fieldRef": {"fieldPath": "metadata.labels"}}]
                },
            }
        },
        f"{VOLS}[3].downwardAPI.fields[0].path",
        "relative path without '..'",
        id="downward-api-escaping-path",
    ),
    pytest.param(
        {
            f"{VOLS}[3]": {
                "name": "data",
                "downwardAPI": {
                    "fields": [{"path": "n", "fieldRef": {"fieldPath": "spec.nodeName"}}]
                },
            }
        },
        f"{VOLS}[3].downwardAPI.fields[0].fieldRef.fieldPath",
        "must be one of metadata.annotations",
        id="downward-api-field-not-in-volumes",
    ),
    pytest.param(
        {f"{VOLS}[3]": {"name": "data", "downwardAPI": {"fields": [{"path": "n"}]}}},
        f"{VOLS}[3].downwardAPI.fields[0]",
        "exactly one of fieldRef, resourceFieldRef",
        id="downward-api-no-ref",
    ),
    pytest.param(
        {f"{CI}.userDataBase64": DELETE, f"{CI}.secretRef": {}},
        f"{CI}.secretRef.name",
        "is required",
        id="secret-ref-no-name",
    ),
    pytest.param(
        {
            f"{VOLS}[1]": {
                "name": "cloudinitdisk",
                "cloudInitConfigDrive": {"userData": "x", "secretRef": {"name": "s"}},
            }
        },
        f"{VOLS}[1].cloudInitConfigDrive",
        "exactly one of userData, userDataBase64, secretRef (found userData, secretRef)",
        id="config-drive-two-user-data",
    ),
    pytest.param(
        {f"{VOLS}[2].emptyDisk.capacity": DELETE},
        f"{VOLS}[2].emptyDisk.capacity",
        "is required",
        id="empty-disk-no-capacity",
    ),
    pytest.param(
        {f"{VOLS}[2].emptyDisk.capacity": "0"},
        f"{VOLS}[2].emptyDisk.capacity",
        "greater than 0",
        id="empty-disk-zero",
    ),
    pytest.param(
        {f"{VOLS}[2].emptyDisk.capacity": "-1Gi"},
        f"{VOLS}[2].emptyDisk.capacity",
        "greater than 0",
        id="empty-disk-negative",
    ),
    pytest.param(
        {f"{VOLS}[0].containerDisk.image": ""},
        f"{VOLS}[0].containerDisk.image",
        "is required",
        id="container-disk-image-empty",
    ),
    pytest.param(
        {f"{VOLS}[0].containerDisk.image": "not an image!"},
        f"{VOLS}[0].containerDisk.image",
        "not a valid image",
        id="container-disk-junk",
    ),
    pytest.param(
        {f"{VOLS}[0].containerDisk.image": "quay.io/Fedora:40"},
        f"{VOLS}[0].containerDisk.image",
        "not a valid image",
        id="container-disk-upper-repo",
    ),
    pytest.param(
        {f"{VOLS}[0].containerDisk.path": "disk/guest.qcow2"},
        f"{VOLS}[0].containerDisk.path",
        "absolute",
        id="container-disk-path-relative",
    ),
    pytest.param(
        {f"{VOLS}[3]": {"name": "data", "persistentVolumeClaim": {"claimName": "A_B"}}},
        f"{VOLS}[3].persistentVolumeClaim.claimName",
        "DNS-1123",
        id="pvc-claim-name",
    ),
    # cloud-init
    pytest.param(
        {f"{CI}.userData": "#cloud-config\n"},
        CI,
        "exactly one of userData, userDataBase64, secretRef (found userData, userDataBase64)",
        id="user-data-both",
    ),
    pytest.param(
        {f"{CI}.userDataBase64": DELETE}, CI, "exactly one of userData", id="user-data-none"
    ),
    pytest.param(
        {f"{CI}.userDataBase64": "not base64!"},
        f"{CI}.userDataBase64",
        "not valid base64",
        id="user-data-bad-base64",
    ),
    pytest.param(
        {f"{CI}.userDataBase64": DELETE, f"{CI}.userData": "x" * (64 * KI + 1)},
        f"{CI}.userData",
        "more than the limit of 65536",
        id="user-data-too-big",
    ),
    pytest.param(
        {f"{CI}.userDataBase64": base64.b64encode(b"x" * (64 * KI + 1)).decode()},
        f"{CI}.userDataBase64",
        "more than the limit",
        id="user-data-b64-too-big",
    ),
    pytest.param(
        {f"{CI}.networkData": "version: 2\n"},
        CI,
        "at most one of networkData, networkDataBase64",
        id="network-data-both",
    ),
    pytest.param(
        {f"{CI}.networkDataBase64": "%%%"},
        f"{CI}.networkDataBase64",
        "not valid base64",
        id="network-data-bad-base64",
    ),
    pytest.param(
        {f"{CI}.networkDataBase64": DELETE, f"{CI}.networkData": "y" * (64 * KI + 1)},
        f"{CI}.networkData",
        "more than the limit",
        id="network-data-too-big",
    ),
]


@pytest.mark.parametrize(("changes", "path", "fragment"), RULES)
def test_rule_reports_problem_at_path(changes: dict[str, Any], path: str, fragment: str) -> None:
    """Each broken rule is reported at its field path with an explaining message."""
    errors = vmi_errors(changes)
    found = messages_at(errors, path)
    assert any(fragment in m for m in found), (path, [str(e) for e in errors])


def _many_disks(bus: str, count: int) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    for i in range(count):
        changes[f"{DISKS}[{4 + i}]"] = {"name": f"extra{i}", "disk": {"bus": bus}}
        changes[f"{VOLS}[{4 + i}]"] = {"name": f"extra{i}", "emptyDisk": {"capacity": "1Mi"}}
    return changes


def test_27_virtio_disks_are_valid() -> None:
    """27 virtio disks (past vdz) are within the virtio limit."""
    errors = vmi_errors(_many_disks("virtio", 25))
    assert [e for e in errors if "bus" in e.path] == []


@pytest.mark.parametrize("bus", ["virtio", "sata", "scsi", "usb"])
def test_one_disk_past_a_bus_limit_is_named(bus: str) -> None:
    """The first disk beyond its bus's limit is reported at its bus field, with the
    count and the limit; nothing is reported at the limit itself."""
    fixture = VirtualMachineInstance.from_dict(load("vmi-running.yaml"))
    present = sum(1 for d in fixture.spec.domain.devices.disks if d.effective_bus == bus)
    limit = DISK_BUS_LIMITS[bus]
    at_limit = vmi_errors(_many_disks(bus, limit - present))
    assert [e for e in at_limit if e.path.endswith(".bus")] == []
    over = vmi_errors(_many_disks(bus, limit - present + 2))
    first_over = 4 + limit - present
    assert messages_at(over, f"{DISKS}[{first_over}].disk.bus") == [
        f"{limit + 2} disks on the {bus} bus: at most {limit} are supported"
    ]
