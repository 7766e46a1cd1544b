"""A launcher pod of a VMI with a TPM gets a small /tmp emptyDir in its compute container
(swtpm_setup writes its pidfile there and the root filesystem is read-only); others don't."""

from __future__ import annotations

from typing import Any

import pytest

from controller.config import TemplateConfig
from controller.services.template import TemplateService
from tests.unit.controller.builders import make_vmi, vmi_dict
from tests.unit.controller.services.test_template import IMAGE, compute


def _pod(tpm: dict[str, Any] | None) -> dict[str, Any]:
    raw = vmi_dict()
    if tpm is not None:
        raw["spec"]["domain"]["devices"]["tpm"] = tpm
    return TemplateService(TemplateConfig(launcher_image=IMAGE)).launcher_pod(make_vmi(raw=raw))


def _tmp_mounts(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in compute(pod)["volumeMounts"] if m["mountPath"] == "/tmp"]


def test_a_tpm_gets_a_writable_tmp() -> None:
    """tpm: {} gives the compute container /tmp on a size-limited emptyDir; the root
    filesystem stays read-only."""
    pod = _pod({})
    (mount,) = _tmp_mounts(pod)
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == mount["name"]]
    assert volume["emptyDir"] == {"sizeLimit": "1Mi"}
    assert compute(pod)["securityContext"]["readOnlyRootFilesystem"] is True


@pytest.mark.parametrize("tpm", [None, {"enabled": False}], ids=["none", "disabled"])
def test_no_tpm_no_tmp(tpm: dict[str, Any] | None) -> None:
    """Without a TPM (or with it disabled) the pod has no /tmp volume."""
    assert _tmp_mounts(_pod(tpm)) == []
