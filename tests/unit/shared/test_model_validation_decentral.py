"""Decentralized live migration (KubeVirt 1.7): a VMIM's spec.sendTo / spec.receive and a
VM's runStrategy WaitAsReceiver are typed and round-trip; bad values are refused at
admission naming the field (KubeVirt's messages where it has one); well-formed ones in
this cluster are admitted, another cluster's address, a VMIM that is both halves and a
pool of receivers are refused as not supported; the feature gate is KubeVirt's."""

from __future__ import annotations

from typing import Any

import pytest

from shared.clusterconfig import ClusterConfig
from shared.model import VirtualMachine, VirtualMachineInstanceMigration
from shared.model._unsupported_decentral import BOTH_HALVES, POOL_RECEIVER
from shared.model.enums import RunStrategy
from shared.model.pool import VirtualMachinePool
from shared.model.unsupported import unsupported_fields
from shared.model.validation import validate_migration
from tests.unit.virt_api.admission.test_validate import client, review
from virt_api.admission.gates import DECENTRALIZED_GATE_OFF, gate_errors
from virt_api.admission.validate import validate

KIND = VirtualMachineInstanceMigration.KIND
MEMORY = {"resources": {"requests": {"memory": "64Mi"}}}
LOCAL = "virt-synchronization-controller.kubevirt.svc:9185"
LOCAL_FQDN = "virt-synchronization-controller.kubevirt.svc.cluster.local:9185"
GATE_ON = ClusterConfig(feature_gates=frozenset({"DecentralizedLiveMigration"}))


def _vmim(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": KIND,
        "metadata": {"name": "m", "namespace": "default"},
        "spec": {"vmiName": "vm", **spec},
    }


def _vm(strategy: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": VirtualMachine.KIND,
        "metadata": {"name": "vm", "namespace": "target"},
        "spec": {"runStrategy": strategy, "template": {"spec": {"domain": MEMORY}}},
    }


def _problems(errors: list[Any]) -> list[tuple[str, str]]:
    return [(e.path, e.message) for e in errors]


def test_both_halves_are_typed_and_round_trip() -> None:
    """sendTo {migrationID, connectURL} and receive {migrationID} keep KubeVirt's keys."""
    send = {"migrationID": "mig-1", "connectURL": "10.0.0.5:9185"}
    vmim = VirtualMachineInstanceMigration.from_dict(
        _vmim(sendTo=send, receive={"migrationID": "mig-1"})
    )
    assert vmim.spec.send_to is not None and vmim.spec.send_to.connect_url == "10.0.0.5:9185"
    assert vmim.spec.receive is not None and vmim.spec.receive.migration_id == "mig-1"
    assert vmim.to_dict()["spec"]["sendTo"] == send
    assert vmim.to_dict()["spec"]["receive"] == {"migrationID": "mig-1"}
    assert validate_migration(vmim) == []


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"sendTo": {"migrationID": "a", "connectURL": LOCAL}}, id="sendTo"),
        pytest.param({"sendTo": {"migrationID": "a", "connectURL": LOCAL_FQDN}}, id="fqdn"),
        pytest.param({"receive": {"migrationID": "a"}}, id="receive"),
        pytest.param({"sendTo": {"migrationID": "a", "connectURL": "10.0.0.5:9185"}}, id="ip"),
        pytest.param({"sendTo": {"migrationID": "a", "connectURL": "sync.other.svc:9185"}}, id="dns"),
        pytest.param({"sendTo": {"migrationID": "a", "connectURL": "[fd00::5]:9185"}}, id="ipv6"),
    ],
)  # fmt: skip
def test_a_half_in_this_or_another_cluster_is_admitted(spec: dict[str, Any]) -> None:
    """A receiving half, and a sending half naming this cluster's synchronization
    address or another cluster's (any host:port), pass validation: the controller pairs
    them in process or through the other cluster's endpoint (docs/migration.md)."""
    assert validate(KIND, _vmim(**spec)) == []


@pytest.mark.parametrize(
    ("spec", "path", "fragment"),
    [
        pytest.param({"sendTo": {"migrationID": "a", "connectURL": LOCAL}, "receive": {"migrationID": "a"}}, "spec.receive", BOTH_HALVES, id="both"),
    ],
)  # fmt: skip
def test_what_kubevirt_py_does_not_run_is_refused_naming_the_field(
    spec: dict[str, Any], path: str, fragment: str
) -> None:
    """A VMIM that is both halves is refused naming the field: never silently waiting or
    run as a local migration."""
    assert _problems(validate(KIND, _vmim(**spec))) == [(path, fragment)]


def test_a_pool_of_receivers_is_refused() -> None:
    """A pool's VM template with WaitAsReceiver is refused naming the field."""
    pool = VirtualMachinePool.from_dict(
        {"spec": {"virtualMachineTemplate": {"spec": {"runStrategy": "WaitAsReceiver"}}}}
    )
    path = "spec.virtualMachineTemplate.spec.runStrategy"
    assert _problems(unsupported_fields(pool)) == [(path, POOL_RECEIVER)]


@pytest.mark.parametrize(
    ("spec", "path", "fragment"),
    [
        pytest.param({"sendTo": {"connectURL": "10.0.0.5:9185"}}, "spec.sendTo.migrationID", "is required", id="no-id"),
        pytest.param({"sendTo": {"migrationID": "", "connectURL": "a:1"}}, "spec.sendTo.migrationID", "is required", id="empty-id"),
        pytest.param({"sendTo": {"migrationID": "a"}}, "spec.sendTo.connectURL", "is required", id="no-url"),
        pytest.param({"sendTo": {"migrationID": "a", "connectURL": "10.0.0.5"}}, "spec.sendTo.connectURL", "must be host:port", id="no-port"),
        pytest.param({"sendTo": {"migrationID": "a", "connectURL": "10.0.0.5:0"}}, "spec.sendTo.connectURL", "port must be 1-65535", id="port-0"),
        pytest.param({"sendTo": {"migrationID": "a", "connectURL": "10.0.0.5:70000"}}, "spec.sendTo.connectURL", "port must be 1-65535", id="port-big"),
        pytest.param({"sendTo": {"migrationID": "a", "connectURL": "https://h:443"}}, "spec.sendTo.connectURL", "no scheme or path", id="scheme"),
        pytest.param({"sendTo": {"migrationID": "a", "connectURL": "bad_host!:80"}}, "spec.sendTo.connectURL", "neither an address nor a DNS name", id="bad-host"),
        pytest.param({"sendTo": {"migrationID": "a", "connectURL": "[zz::1]:80"}}, "spec.sendTo.connectURL", "not an IPv6 address", id="bad-ipv6"),
        pytest.param({"sendTo": {"migrationID": "a", "connectURL": 5}}, "spec.sendTo.connectURL", "expected str", id="not-a-string"),
        pytest.param({"sendTo": "x"}, "spec.sendTo", "expected object", id="not-an-object"),
        pytest.param({"sendTo": {"migrationID": "a", "connectURL": "a:1", "port": 1}}, "spec.sendTo.port", "unknown field", id="unknown-key"),
        pytest.param({"receive": {}}, "spec.receive.migrationID", "is required", id="receive-no-id"),
        pytest.param(
            {"sendTo": {"migrationID": "a", "connectURL": "h:1"}, "receive": {"migrationID": "b"}},
            "spec.sendTo.migrationID",
            "must match spec.receive.migrationID when both are set",
            id="id-mismatch",
        ),
    ],
)  # fmt: skip
def test_a_bad_half_is_refused_naming_the_field(
    spec: dict[str, Any], path: str, fragment: str
) -> None:
    """Admission refuses a missing or malformed migrationID / connectURL, naming it."""
    errors = validate(KIND, _vmim(**spec))
    assert any(e.path == path and fragment in e.message for e in errors), _problems(errors)


def test_wait_as_receiver_is_typed_and_admitted() -> None:
    """A receiving VM's runStrategy parses (not 'unknown value') and is admitted."""
    vm = VirtualMachine.from_dict(_vm("WaitAsReceiver"))
    assert vm.spec.run_strategy is RunStrategy.WAIT_AS_RECEIVER
    assert unsupported_fields(vm) == []
    assert validate(VirtualMachine.KIND, _vm("WaitAsReceiver")) == []


@pytest.mark.parametrize(
    ("kind", "obj", "path"),
    [
        pytest.param(KIND, _vmim(sendTo={"migrationID": "a", "connectURL": "h:1"}), "spec.sendTo", id="sendTo"),
        pytest.param(KIND, _vmim(receive={"migrationID": "a"}), "spec.receive", id="receive"),
        pytest.param(VirtualMachine.KIND, _vm("WaitAsReceiver"), "spec.runStrategy", id="WaitAsReceiver"),
    ],
)  # fmt: skip
def test_the_decentralized_gate_is_kubevirts(kind: str, obj: dict[str, Any], path: str) -> None:
    """Gate off: KubeVirt's message naming the field; gate on: no gate error (the field
    is then refused as not supported by validate())."""
    assert _problems(gate_errors(kind, obj, ClusterConfig())) == [(path, DECENTRALIZED_GATE_OFF)]
    assert DECENTRALIZED_GATE_OFF == (
        "DecentralizedLiveMigration feature gate is not enabled in kubevirt resource"
    )
    assert gate_errors(kind, obj, GATE_ON) == []
    assert gate_errors(KIND, _vmim(), ClusterConfig()) == []


async def test_the_webhook_refuses_a_sending_vmim_naming_the_field() -> None:
    """Through virt-api's /validate: a sendTo VMIM with the gate off is refused (422)
    with KubeVirt's gate message at spec.sendTo and the malformed connectURL named."""
    vmim = _vmim(sendTo={"migrationID": "mig-1", "connectURL": "https://10.0.0.5:9185"})
    async with client() as c:
        body = await (await c.post("/validate", json=review(KIND, vmim))).json()
    status = body["response"]["status"]
    assert body["response"]["allowed"] is False and status["code"] == 422
    assert f"spec.sendTo: {DECENTRALIZED_GATE_OFF}" in status["message"]
    assert "spec.sendTo.connectURL: must be host:port" in status["message"]


@pytest.mark.parametrize("value", ["Sometimes", "WaitAsReceiver", "always", ""])
def test_a_bad_restore_run_strategy_is_refused_naming_the_annotation(value: str) -> None:
    """kubevirt.io/restore-run-strategy must name a run strategy (not WaitAsReceiver):
    refused at admission naming the annotation; a good one passes."""
    vm = _vm("WaitAsReceiver")
    vm["metadata"]["annotations"] = {"kubevirt.io/restore-run-strategy": value}
    path = "metadata.annotations.kubevirt.io/restore-run-strategy"
    ((where, message),) = _problems(validate(VirtualMachine.KIND, vm))
    assert where == path and message.startswith("must be one of Always, ")
    vm["metadata"]["annotations"] = {"kubevirt.io/restore-run-strategy": "Manual"}
    assert validate(VirtualMachine.KIND, vm) == []
