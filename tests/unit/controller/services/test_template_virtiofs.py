"""devices.filesystems in the launcher pod: one `virtiofs-<name>` container per filesystem
running the launcher image's virtiofsd unprivileged (`--sandbox=none`) on the volume's own
pod mount, its socket in the `virtiofs-containers` emptyDir the compute container mounts
too; read-only sources served `--readonly`; a Block claim refused naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from controller.config import TemplateConfig
from controller.errors import SyncError
from controller.services.template import TemplateService
from controller.services.volumes import Claim
from shared import podlayout
from tests.unit.controller.builders import make_vmi, vmi_dict

GI = 1024**3


def _raw() -> dict[str, Any]:
    raw = vmi_dict()
    raw["spec"]["domain"]["devices"]["filesystems"] = [
        {"name": "cfg", "virtiofs": {}},
        {"name": "data", "virtiofs": {}},
    ]
    raw["spec"]["volumes"] = [
        {"name": "cfg", "configMap": {"name": "app-config"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-claim"}},
    ]
    return raw


def _claim(mode: str) -> Claim:
    return Claim(
        name="data-claim", phase="Bound", volume_mode=mode, request_bytes=GI, capacity_bytes=GI
    )


def _pod(*, mode: str = "Filesystem", root: bool = False) -> dict[str, Any]:
    service = TemplateService(TemplateConfig(launcher_as_root=root))
    return service.launcher_pod(make_vmi(raw=_raw()), claims={"data-claim": _claim(mode)})


def _by_name(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in pod["spec"]["containers"]}


def test_a_virtiofsd_container_per_filesystem() -> None:
    """virtiofs-cfg and virtiofs-data run /usr/libexec/virtiofsd from the launcher image,
    non-root like compute, sandbox none, socket in the shared emptyDir, sharing the
    directory the volume is mounted at (the ConfigMap read-only and --readonly)."""
    pod = _pod()
    containers = _by_name(pod)
    compute = containers["compute"]
    cfg, data = containers["virtiofs-cfg"], containers["virtiofs-data"]
    assert cfg["image"] == compute["image"]
    assert cfg["command"] == ["/usr/libexec/virtiofsd"]
    assert "--sandbox=none" in cfg["args"]
    assert f"--socket-path={podlayout.VIRTIOFS_DIR}/cfg.sock" in cfg["args"]
    assert cfg["securityContext"]["runAsUser"] == compute["securityContext"]["runAsUser"] == 107
    assert cfg["securityContext"]["runAsNonRoot"] is True
    cfg_mount = next(m for m in cfg["volumeMounts"] if m["name"] == "cfg")
    assert cfg_mount["readOnly"] is True
    assert f"--shared-dir={cfg_mount['mountPath']}" in cfg["args"]
    assert "--readonly" in cfg["args"]
    data_mount = next(m for m in data["volumeMounts"] if m["name"] == "data")
    assert f"--shared-dir={data_mount['mountPath']}" in data["args"]
    assert "--readonly" not in data["args"]
    sockets = {"name": podlayout.VIRTIOFS_VOLUME, "mountPath": podlayout.VIRTIOFS_DIR}
    for c in (compute, cfg, data):
        assert sockets in c["volumeMounts"]
    assert {"name": podlayout.VIRTIOFS_VOLUME, "emptyDir": {}} in pod["spec"]["volumes"]


def test_root_launcher_sidecars_have_no_security_context() -> None:
    """With launchers as root (the test bed's process nodes) the sidecar sets none either."""
    assert "securityContext" not in _by_name(_pod(root=True))["virtiofs-data"]


def test_no_filesystems_no_sidecar_no_volume() -> None:
    """A VMI without filesystems gets neither containers nor the sockets' emptyDir."""
    pod = TemplateService(TemplateConfig()).launcher_pod(make_vmi())
    assert not [c for c in pod["spec"]["containers"] if c["name"].startswith("virtiofs-")]
    assert all(v["name"] != podlayout.VIRTIOFS_VOLUME for v in pod["spec"]["volumes"])


def test_block_claim_refused_naming_the_field() -> None:
    """A Block-mode claim has no directory to share: SyncError naming filesystems[1]."""
    with pytest.raises(SyncError, match=r"spec\.domain\.devices\.filesystems\[1\]"):
        _pod(mode="Block")
