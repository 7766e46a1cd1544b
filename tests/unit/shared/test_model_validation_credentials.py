"""VMI validation of spec.accessCredentials: KubeVirt's rules and wording (one type, one
source, one propagation method; noCloud / configDrive need their volume; guest-agent keys
name users), each refusal at its field; valid credentials pass."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model.validation import validate_vm
from shared.model.vm import VirtualMachine
from tests.unit.shared._validation_support import messages_at, vmi_errors

A = "spec.accessCredentials"
SECRET = {"secret": {"secretName": "keys"}}
AGENT_SSH = {"source": SECRET, "propagationMethod": {"qemuGuestAgent": {"users": ["root"]}}}
PASSWORD = {"source": SECRET, "propagationMethod": {"qemuGuestAgent": {}}}

RULES = [
    pytest.param({A: [{}]}, f"{A}[0]", "exactly one access credential type", id="no-type"),
    pytest.param(
        {A: [{"sshPublicKey": AGENT_SSH, "userPassword": PASSWORD}]},
        f"{A}[0]",
        "exactly one access credential type",
        id="two-types",
    ),
    pytest.param(
        {A: [{"sshPublicKey": {"propagationMethod": {"noCloud": {}}}}]},
        f"{A}[0].sshPublicKey.source",
        "exactly one source",
        id="ssh-no-source",
    ),
    pytest.param(
        {A: [{"sshPublicKey": {"source": SECRET}}]},
        f"{A}[0].sshPublicKey.propagationMethod",
        "exactly one propagationMethod",
        id="ssh-no-method",
    ),
    pytest.param(
        {
            A: [
                {
                    "sshPublicKey": {
                        "source": SECRET,
                        "propagationMethod": {"noCloud": {}, "qemuGuestAgent": {"users": ["a"]}},
                    }
                }
            ]
        },
        f"{A}[0].sshPublicKey.propagationMethod",
        "exactly one propagationMethod",
        id="ssh-two-methods",
    ),
    pytest.param(
        {A: [{"sshPublicKey": {"source": SECRET, "propagationMethod": {"configDrive": {}}}}]},
        f"{A}[0].sshPublicKey.propagationMethod",
        "requires a configDrive volume",
        id="config-drive-without-volume",
    ),
    pytest.param(
        {
            A: [{"sshPublicKey": {"source": SECRET, "propagationMethod": {"noCloud": {}}}}],
            "spec.volumes[1]": {"name": "cloudinitdisk", "emptyDisk": {"capacity": "1Mi"}},
        },
        f"{A}[0].sshPublicKey.propagationMethod",
        "requires a noCloud volume",
        id="no-cloud-without-volume",
    ),
    pytest.param(
        {
            A: [
                {
                    "sshPublicKey": {
                        "source": SECRET,
                        "propagationMethod": {"qemuGuestAgent": {"users": []}},
                    }
                }
            ]
        },
        f"{A}[0].sshPublicKey.propagationMethod.qemuGuestAgent.users",
        "at least one user",
        id="agent-no-users",
    ),
    pytest.param(
        {
            A: [
                {
                    "sshPublicKey": {
                        "source": SECRET,
                        "propagationMethod": {"qemuGuestAgent": {"users": ["a b"]}},
                    }
                }
            ]
        },
        f"{A}[0].sshPublicKey.propagationMethod.qemuGuestAgent.users[0]",
        "user name",
        id="agent-bad-user",
    ),
    pytest.param(
        {A: [{"userPassword": {"source": SECRET}}]},
        f"{A}[0].userPassword.propagationMethod",
        "exactly one propagationMethod",
        id="password-no-method",
    ),
    pytest.param(
        {A: [{"userPassword": {"propagationMethod": {"qemuGuestAgent": {}}}}]},
        f"{A}[0].userPassword.source",
        "exactly one source",
        id="password-no-source",
    ),
    pytest.param(
        {A: [{"userPassword": {**PASSWORD, "source": {"secret": {"secretName": "Bad_Name"}}}}]},
        f"{A}[0].userPassword.source.secret.secretName",
        "DNS-1123",
        id="secret-name",
    ),
    pytest.param(
        {A: [{"userPassword": {**PASSWORD, "source": {"secret": {}}}}]},
        f"{A}[0].userPassword.source.secret.secretName",
        "is required",
        id="secret-name-missing",
    ),
]


@pytest.mark.parametrize(("changes", "path", "fragment"), RULES)
def test_rule_reports_problem_at_path(changes: dict[str, Any], path: str, fragment: str) -> None:
    """Each broken rule is reported at its field path with KubeVirt's message."""
    found = messages_at(vmi_errors(changes), path)
    assert any(fragment in m for m in found), found


def test_too_many_credentials_refused() -> None:
    """More than KubeVirt's 256 entries is refused at the list, entries unchecked."""
    errors = vmi_errors({A: [{}] * 257})
    assert [e.path for e in errors] == [A]


def test_valid_credentials_pass() -> None:
    """Guest-agent keys and password, and noCloud keys beside a cloudInitNoCloud volume,
    are accepted."""
    changes = {
        A: [
            {"sshPublicKey": AGENT_SSH},
            {"userPassword": PASSWORD},
            {"sshPublicKey": {"source": SECRET, "propagationMethod": {"noCloud": {}}}},
        ]
    }
    assert vmi_errors(changes) == []


def test_vm_template_credentials_validated() -> None:
    """A VM's template is checked the same way, paths rooted at spec.template.spec."""
    vm = VirtualMachine.from_dict(
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": {"name": "vm", "namespace": "default"},
            "spec": {
                "runStrategy": "Halted",
                "template": {
                    "spec": {
                        "domain": {"resources": {"requests": {"memory": "64Mi"}}},
                        "accessCredentials": [{"userPassword": {"source": SECRET}}],
                    }
                },
            },
        }
    )
    paths = [e.path for e in validate_vm(vm)]
    assert "spec.template.spec.accessCredentials[0].userPassword.propagationMethod" in paths
