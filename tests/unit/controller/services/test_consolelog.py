"""The launcher pod's guest-console-log container: when a VMI gets it (logSerialConsole
over the KubeVirt CR's disableSerialConsoleLog; never without a serial console), and its
shape (the launcher image's python, the private volume read-only, the compute container's
non-root security context)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.config import TemplateConfig
from controller.services.consolelog import GUEST_CONSOLE_LOG_CONTAINER
from controller.services.template import TemplateService
from shared import podlayout
from shared.clusterconfig import ClusterConfig, resolve
from shared.model.kubevirt import KubeVirt
from tests.unit.controller.builders import make_vmi, vmi_dict


def _pod(devices: dict[str, Any], *, disabled: bool = True, root: bool = False) -> dict[str, Any]:
    raw = vmi_dict()
    raw["spec"]["domain"]["devices"].update(devices)
    config = TemplateConfig(serial_console_log_disabled=disabled, launcher_as_root=root)
    return TemplateService(config).launcher_pod(make_vmi(raw=raw))


def _names(pod: dict[str, Any]) -> list[str]:
    return [c["name"] for c in pod["spec"]["containers"]]


CASES = [
    pytest.param({}, True, False, id="default-cluster-off"),
    pytest.param({}, False, True, id="cluster-on"),
    pytest.param({"logSerialConsole": True}, True, True, id="vmi-on"),
    pytest.param({"logSerialConsole": False}, False, False, id="vmi-off-over-cluster"),
    pytest.param(
        {"logSerialConsole": True, "autoattachSerialConsole": False}, False, False,
        id="no-serial-console",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("devices", "disabled", "expected"), CASES)
def test_container_when_asked(devices: dict[str, Any], disabled: bool, expected: bool) -> None:
    """logSerialConsole wins over the cluster default; no serial console, no log."""
    assert (GUEST_CONSOLE_LOG_CONTAINER in _names(_pod(devices, disabled=disabled))) is expected


def test_container_shape_non_root() -> None:
    """The launcher image's python follows the serial log (private volume, read-only) and
    watches the launcher's sockets; it runs as the compute container does (uid 107,
    read-only root filesystem); compute stays the first container."""
    pod = _pod({"logSerialConsole": True})
    compute, log = pod["spec"]["containers"]
    assert compute["name"] == "compute"
    assert log["image"] == compute["image"]
    assert log["command"] == ["python3", "-m", "launcher.consolelog"]
    assert log["args"][:2] == ["--log", f"{podlayout.PRIVATE_DIR}/{podlayout.SERIAL_LOG}"]
    assert f"{podlayout.SOCKETS_DIR}/{podlayout.LAUNCHER_SOCKET}" in log["args"]
    mounts = {m["mountPath"]: m for m in log["volumeMounts"]}
    assert mounts[podlayout.PRIVATE_DIR]["readOnly"] is True
    assert log["securityContext"] == compute["securityContext"]
    assert log["securityContext"]["readOnlyRootFilesystem"] is True
    assert log["resources"]["requests"] == {"cpu": "5m", "memory": "35Mi"}


def test_container_as_root_has_no_security_context() -> None:
    """Under the root switch the follower, like compute, has no securityContext."""
    log = _pod({"logSerialConsole": True}, root=True)["spec"]["containers"][1]
    assert "securityContext" not in log


@pytest.mark.parametrize(
    ("options", "disabled"),
    [
        pytest.param(None, True, id="absent-kubevirt-default"),
        pytest.param({}, False, id="options-without-disable"),
        pytest.param({"disableSerialConsoleLog": {}}, True, id="disabled"),
    ],
)
def test_cluster_default_from_the_kubevirt_cr(options: Any, disabled: bool) -> None:
    """virtualMachineOptions.disableSerialConsoleLog ({} = off), KubeVirt's default off."""
    configuration: dict[str, Any] = {}
    if options is not None:
        configuration["virtualMachineOptions"] = options
    kv = KubeVirt.from_dict(
        {"metadata": {"name": "kubevirt", "namespace": "kubevirt"},
         "spec": {"configuration": configuration}}
    )  # fmt: skip
    assert resolve(ClusterConfig(), kv).serial_console_log_disabled is disabled
