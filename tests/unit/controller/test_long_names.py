"""Every name the controller derives from a user's name, for maximal legal user names
(63-character DNS labels where the kind allows only those here, 253-character subdomains
where the kind allows them): each fits Kubernetes' limit (and X.509's for certificates),
is deterministic, and distinct inputs give distinct names."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from controller.datavolume.pods import DV_LABEL, claim_body, worker_name
from controller.datavolume.workers import decode_worker
from controller.drain.budget_logic import budget_name
from controller.export.bodies import cert_secret_name, selector_value
from controller.export.certs import make_certs, service_names
from controller.export.snapshot_source import restored_claim_name
from controller.pool.logic import POOL_LABEL, index_of, member_name, vm_body, vm_spec
from controller.services.template import pod_name
from controller.snapshot.clone_logic import restore_name, snapshot_name, target_name
from controller.snapshot.logic import content_name, volume_snapshot_name
from controller.snapshot.restore_logic import claim_name
from shared import podlayout
from shared.expansion import revision_name
from shared.kube.events import event_name
from shared.model import VirtualMachine
from shared.model.clone import VirtualMachineClone
from shared.model.datavolume import DataVolume
from shared.model.datavolume_spec import target
from shared.model.export import VirtualMachineExport, default_token_secret, export_names
from shared.model.pool import VirtualMachinePool
from shared.model.snapshot import VirtualMachineRestore, VirtualMachineSnapshot, VolumeBackup
from shared.naming import COMMON_NAME, LABEL, SUBDOMAIN
from shared.upload import upload_pod_name
from tests.unit.controller.builders import vmi_dict

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
UID = "0c6a5b2e-6f4e-4d0e-9a43-6a9d1a2b3c4d"


def label63(i: int) -> str:
    """A maximal DNS-1123 label (VM, VMI, volume, claim, namespace names here)."""
    return "n" * 59 + f"{i:04d}"


def subdomain253(i: int) -> str:
    """A maximal DNS-1123 subdomain (DataVolume, export, pool, snapshot, restore, clone)."""
    return ".".join(["s" * 63] * 3) + "." + "s" * 57 + f"{i:04d}"


def _meta(name: str, uid: str = UID) -> dict[str, Any]:
    return {"name": name, "namespace": label63(0), "uid": uid}


def _dv(name: str, *, upload: bool = False) -> DataVolume:
    source = {"upload": {}} if upload else {"registry": {"url": "docker://r/i:v1"}}
    return DataVolume.from_dict(
        {
            "apiVersion": "cdi.kubevirt.io/v1beta1",
            "kind": "DataVolume",
            "metadata": _meta(name),
            "spec": {"source": source, "storage": {"resources": {"requests": {"storage": "1Gi"}}}},
        }
    )


def _export(name: str) -> VirtualMachineExport:
    return VirtualMachineExport.from_dict({"metadata": _meta(name), "spec": {}})


def _snapshot(name: str) -> VirtualMachineSnapshot:
    return VirtualMachineSnapshot.from_dict({"metadata": _meta(name, f"{name[-4:]}-uid")})


def _backup(volume: str) -> VolumeBackup:
    return VolumeBackup.from_dict(
        {"volumeName": volume, "persistentVolumeClaim": {"metadata": {"name": volume}}}
    )


def _restore(name: str, *, uid: str = UID, policy: str | None = None) -> VirtualMachineRestore:
    spec: dict[str, Any] = {
        "target": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": label63(1)},
        "virtualMachineSnapshotName": "snap",
    }
    if policy:
        spec["volumeRestorePolicy"] = policy
    return VirtualMachineRestore.from_dict({"metadata": _meta(name, uid), "spec": spec})


def _pool(name: str, *, dv: str = "data", secret: str = "userdata") -> VirtualMachinePool:
    vmi_spec = {
        "domain": {"devices": {}},
        "volumes": [
            {"name": "data", "dataVolume": {"name": dv}},
            {"name": "ci", "cloudInitNoCloud": {"secretRef": {"name": secret}}},
        ],
    }
    template = {
        "metadata": {"labels": {"pool": "p"}},
        "spec": {
            "dataVolumeTemplates": [{"metadata": {"name": dv}, "spec": {}}],
            "template": {"metadata": {"labels": {"pool": "p"}}, "spec": vmi_spec},
        },
    }
    spec = {
        "replicas": 1,
        "selector": {"matchLabels": {"pool": "p"}},
        "virtualMachineTemplate": template,
        "nameGeneration": {"appendIndexToSecretRefs": True},
    }
    return VirtualMachinePool.from_dict({"metadata": _meta(name), "spec": spec})


def _vm(name: str) -> VirtualMachine:
    return VirtualMachine.from_dict(
        {"metadata": _meta(name), "spec": {"template": {"spec": vmi_dict()["spec"]}}}
    )


def _instancetype(name: str) -> dict[str, Any]:
    meta = _meta(name) | {"generation": 12345}
    return {"kind": "VirtualMachineClusterInstancetype", "metadata": meta}


def _pool_dv(name: str) -> str:
    """The member's DataVolume; the volume naming it says the same."""
    spec = vm_spec(_pool("p", dv=name), 99999)
    volume = spec["template"]["spec"]["volumes"][0]["dataVolume"]["name"]
    assert volume == spec["dataVolumeTemplates"][0]["metadata"]["name"]
    return str(volume)


def _pool_secret(name: str) -> str:
    volumes = vm_spec(_pool("p", secret=name), 99999)["template"]["spec"]["volumes"]
    return str(volumes[1]["cloudInitNoCloud"]["secretRef"]["name"])


def _clone(name: str) -> VirtualMachineClone:
    return VirtualMachineClone.from_dict({"metadata": _meta(name, f"{name[-4:]}-uid"), "spec": {}})


# (what, user name → derived name, the user names' shape, the derived name's rule, limit)
Builder = Callable[[str], str]
FAMILIES = [
    pytest.param(lambda n: pod_name(n, "seed"), label63, DNS_SUBDOMAIN, SUBDOMAIN, id="launcher-pod"),
    pytest.param(lambda n: podlayout.attachment_pod_name(UID, n), label63, DNS_LABEL, LABEL, id="hotplug-attachment-pod"),
    pytest.param(lambda n: podlayout.derived_volume_name(n, "-udata"), label63, DNS_LABEL, LABEL, id="pod-volume-derived"),
    pytest.param(lambda n: event_name(n, "187c0a1b2c3d4e5fab12"), subdomain253, DNS_SUBDOMAIN, SUBDOMAIN, id="event"),
    pytest.param(budget_name, label63, DNS_SUBDOMAIN, SUBDOMAIN, id="disruption-budget"),
    pytest.param(lambda n: revision_name(_vm(label63(5)), _instancetype(n)), label63, DNS_SUBDOMAIN, SUBDOMAIN, id="controller-revision"),
    pytest.param(lambda n: revision_name(_vm(n), _instancetype(label63(5))), label63, DNS_SUBDOMAIN, SUBDOMAIN, id="controller-revision-vm"),
    pytest.param(lambda n: worker_name(_dv(n)), subdomain253, DNS_LABEL, LABEL, id="datavolume-importer-pod"),
    pytest.param(lambda n: worker_name(_dv(n, upload=True)), subdomain253, DNS_LABEL, LABEL, id="datavolume-upload-pod"),
    pytest.param(upload_pod_name, subdomain253, DNS_LABEL, LABEL, id="upload-server-pod"),
    pytest.param(lambda n: claim_body(_dv(n), target(_dv(n)))["metadata"]["labels"][DV_LABEL], subdomain253, LABEL_VALUE, LABEL, id="datavolume-claim-label"),
    pytest.param(lambda n: export_names(n)[0], subdomain253, DNS_1035, LABEL, id="export-pod-and-service"),
    pytest.param(default_token_secret, subdomain253, DNS_SUBDOMAIN, SUBDOMAIN, id="export-token-secret"),
    pytest.param(lambda n: cert_secret_name(_export(n)), subdomain253, DNS_SUBDOMAIN, SUBDOMAIN, id="export-cert-secret"),
    pytest.param(lambda n: selector_value(_export(n)), subdomain253, LABEL_VALUE, LABEL, id="export-service-selector"),
    pytest.param(lambda n: restored_claim_name(_export(n), _backup(label63(7))), subdomain253, DNS_SUBDOMAIN, LABEL, id="export-restored-claim"),
    pytest.param(lambda n: restored_claim_name(_export(label63(7)), _backup(n)), label63, DNS_SUBDOMAIN, LABEL, id="export-restored-claim-volume"),
    pytest.param(lambda n: volume_snapshot_name(UID, n), label63, DNS_SUBDOMAIN, SUBDOMAIN, id="volume-snapshot"),
    pytest.param(lambda n: content_name(_snapshot(n)), subdomain253, DNS_SUBDOMAIN, SUBDOMAIN, id="snapshot-content"),
    pytest.param(lambda n: claim_name(_restore("r"), _backup(n)), label63, DNS_SUBDOMAIN, LABEL, id="restore-claim"),
    pytest.param(lambda n: claim_name(_restore("r", policy="PrefixTargetName"), _backup(n)), label63, DNS_SUBDOMAIN, LABEL, id="restore-claim-prefix-target"),
    pytest.param(lambda n: snapshot_name(_clone(n)), subdomain253, DNS_SUBDOMAIN, SUBDOMAIN, id="clone-snapshot"),
    pytest.param(lambda n: restore_name(_clone(n)), subdomain253, DNS_SUBDOMAIN, SUBDOMAIN, id="clone-restore"),
    pytest.param(lambda n: target_name(_clone(n)), subdomain253, DNS_SUBDOMAIN, LABEL, id="clone-target"),
    pytest.param(lambda n: member_name(_pool(n), 99999), subdomain253, DNS_SUBDOMAIN, LABEL, id="pool-member-vm"),
    pytest.param(lambda n: vm_body(_pool(n), 0)["metadata"]["labels"][POOL_LABEL], subdomain253, LABEL_VALUE, LABEL, id="pool-member-label"),
    pytest.param(_pool_dv, label63, DNS_SUBDOMAIN, LABEL, id="pool-member-datavolume"),
    pytest.param(_pool_secret, subdomain253, DNS_SUBDOMAIN, SUBDOMAIN, id="pool-member-secret"),
]  # fmt: skip


@pytest.mark.parametrize(("build", "user", "rule", "limit"), FAMILIES)
def test_derived_names_fit_are_stable_and_distinct(
    build: Builder, user: Callable[[int], str], rule: re.Pattern[str], limit: int
) -> None:
    """Each family's name for a maximal user name fits its limit and rule, is the same at
    every call, and user names that differ only in their last characters stay apart."""
    names = [build(user(i)) for i in range(1, 40)]
    for name in names:
        assert len(name) <= limit, name
        assert rule.fullmatch(name), name
    assert names == [build(user(i)) for i in range(1, 40)]
    assert len(set(names)) == len(names)


def test_exporter_certificate_names_fit_x509() -> None:
    """The reported bug: a 253-character export in a 63-character namespace gets a serving
    certificate (CN ≤ 64, the CA's too) whose SAN still carries every Service DNS name."""
    service = export_names(subdomain253(1))[0]
    namespace = label63(2)
    certs = make_certs(service=service, namespace=namespace, valid=timedelta(hours=1))
    for pem in (certs.cert, certs.ca):
        cert = x509.load_pem_x509_certificate(pem.encode())
        (cn,) = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        assert 0 < len(str(cn.value)) <= COMMON_NAME
    serving = x509.load_pem_x509_certificate(certs.cert.encode())
    san = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.DNSName)) == set(service_names(service, namespace))


def test_pool_members_keep_their_index() -> None:
    """A long pool's member names still say their index (scale-in order, autohealing)."""
    pool = _pool(subdomain253(1))
    for index in (0, 7, 99999):
        raw = vm_body(pool, index)
        vm = VirtualMachine.from_dict({**raw, "metadata": {**raw["metadata"], "uid": "u"}})
        assert index_of(pool, vm) == index
    other = vm_body(_pool(subdomain253(2)), 3)
    assert index_of(pool, VirtualMachine.from_dict(other)) is None


def test_a_long_datavolumes_worker_maps_back_to_it() -> None:
    """The worker pod's label is cut; the watch maps the pod back through its owner."""
    name = subdomain253(1)
    dv = _dv(name)
    body = claim_body(dv, target(dv))
    raw = {"metadata": {**body["metadata"], "name": worker_name(dv)}}
    assert decode_worker(raw).datavolume_key == f"{dv.namespace}/{name}"
