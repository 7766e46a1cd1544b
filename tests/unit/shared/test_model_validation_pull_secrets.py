"""containerDisk.imagePullSecret and kernelBoot.container.imagePullSecret: typed, kept on a
round trip, and refused at their path when they cannot name a Secret."""

from __future__ import annotations

import pytest

from shared.model import VirtualMachineInstance
from tests.unit.shared._validation_support import KB, VOLS, edit, load, messages_at, vmi_errors

CD_SECRET = f"{VOLS}[0].containerDisk.imagePullSecret"
KB_SECRET = f"{KB}.container.imagePullSecret"


def test_pull_secrets_are_typed_and_round_trip() -> None:
    """Both fields parse into the model and are written back as they came."""
    raw = edit(load("vmi-running.yaml"), {CD_SECRET: "regcred", KB_SECRET: "kernel-cred"})
    vmi = VirtualMachineInstance.from_dict(raw)
    cd = vmi.spec.volumes[0].container_disk
    kb = vmi.spec.domain.kernel_boot
    assert cd is not None and cd.image_pull_secret == "regcred"
    assert kb is not None and kb.container is not None
    assert kb.container.image_pull_secret == "kernel-cred"
    assert vmi.to_dict()["spec"]["volumes"][0]["containerDisk"]["imagePullSecret"] == "regcred"


def test_valid_pull_secrets_pass() -> None:
    """Secret names (DNS-1123 subdomains) are accepted on both images."""
    errors = vmi_errors({CD_SECRET: "reg.cred-1", KB_SECRET: "regcred"})
    assert not messages_at(errors, CD_SECRET) and not messages_at(errors, KB_SECRET)


@pytest.mark.parametrize("path", [CD_SECRET, KB_SECRET], ids=["containerDisk", "kernelBoot"])
@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("", "is required", id="empty"),
        pytest.param("Reg_Cred", "DNS-1123 subdomain", id="not-a-name"),
        pytest.param("a" * 64, "at most 63 characters", id="too-long"),
    ],
)
def test_bad_pull_secrets_are_refused_at_their_path(path: str, value: str, message: str) -> None:
    """An empty name, a name that is not a DNS-1123 subdomain or one too long is refused,
    naming the field."""
    found = messages_at(vmi_errors({path: value}), path)
    assert any(message in m for m in found), found
