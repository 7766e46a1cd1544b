"""Configuration parsing (handler.config) and launcher error mapping (handler.commands)."""

from __future__ import annotations

from pathlib import Path

import pytest

from handler.commands import sync_error
from handler.config import Config
from handler.errors import LauncherUnavailable, StartupError, SyncReason
from shared.wire.errors import CallTimeout, CommandFailed, Disconnected, ErrorCode
from shared.wire.launcher_api import Method


def test_defaults_follow_the_launcher_pod_contract() -> None:
    """Node from NODE_NAME; kubelet pods dir; the notify socket under the shared hostPath."""
    config = Config.from_args([], environ={"NODE_NAME": "node01"})
    assert config.node_name == "node01"
    assert config.pods_dir == Path("/var/lib/kubelet/pods")
    assert config.notify_socket == Path("/var/run/kubevirt-py/nodes/node01/domain-notify.sock")
    assert config.kubeconfig is None and config.workers == 10
    assert config.timing.acpi_interval <= 5


def test_flags_override() -> None:
    """Flags win over the environment."""
    config = Config.from_args(
        [
            "--node-name",
            "n2",
            "--pods-dir",
            "/var/lib/kvpy/n2/pods",
            "--kubeconfig",
            "/k",
            "--workers",
            "3",
        ],
        environ={"NODE_NAME": "node01"},
    )
    assert (config.node_name, config.pods_dir, config.kubeconfig, config.workers) == (
        "n2",
        Path("/var/lib/kvpy/n2/pods"),
        Path("/k"),
        3,
    )


def test_actions_endpoint_follows_the_mounted_certificates(tmp_path: Path) -> None:
    """No certificates: no actions endpoint; a mounted kubernetes.io/tls Secret turns it on."""
    assert Config.from_args([], environ={"NODE_NAME": "n"}).actions is None
    for name in ("tls.crt", "tls.key", "ca.crt"):
        (tmp_path / name).write_text("x")
    env = {"NODE_NAME": "n", "VIRT_HANDLER_ACTIONS_CERT_DIR": str(tmp_path)}
    actions = Config.from_args([], environ=env).actions
    assert actions is not None and actions.cert_dir == tmp_path


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param([], id="no-node"),
        pytest.param(["--node-name", "n", "--acpi-interval", "9"], id="acpi-too-slow"),
        pytest.param(["--node-name", "n", "--workers", "0"], id="no-workers"),
    ],
)
def test_bad_configuration_is_refused(argv: list[str]) -> None:
    """Startup errors name the flag at fault."""
    with pytest.raises(StartupError):
        Config.from_args(argv, environ={})


@pytest.mark.parametrize(
    ("exc", "reason", "fatal", "requeue"),
    [
        pytest.param(
            LauncherUnavailable("starting"),
            SyncReason.LAUNCHER_NOT_READY,
            False,
            False,
            id="not-ready",
        ),
        pytest.param(
            CallTimeout("sync", 60), SyncReason.LAUNCHER_TIMEOUT, False, True, id="timeout"
        ),
        pytest.param(
            Disconnected("gone"), SyncReason.LAUNCHER_UNREACHABLE, False, True, id="disconnected"
        ),
        pytest.param(
            CommandFailed(ErrorCode.INVALID_VMI, "bad"),
            SyncReason.INVALID_SPEC,
            True,
            False,
            id="invalid",
        ),
        pytest.param(
            CommandFailed(ErrorCode.IMAGE_NOT_FOUND, "x"),
            SyncReason.IMAGE_NOT_FOUND,
            False,
            True,
            id="image",
        ),
        pytest.param(
            CommandFailed(ErrorCode.DISK, "x"), SyncReason.DISK_ERROR, False, True, id="disk"
        ),
        pytest.param(
            CommandFailed(ErrorCode.LIBVIRT, "x"),
            SyncReason.LIBVIRT_ERROR,
            False,
            True,
            id="libvirt",
        ),
        pytest.param(
            CommandFailed(ErrorCode.INTERNAL, "x"),
            SyncReason.SYNC_FAILED,
            False,
            True,
            id="internal",
        ),
    ],
)
def test_wire_errors_map_to_sync_reasons(
    exc: Exception, reason: SyncReason, fatal: bool, requeue: bool
) -> None:
    """Each typed wire error becomes the reason users read in Synchronized."""
    err = sync_error(Method.SYNC, exc)
    assert (err.reason, err.fatal, err.requeue) == (reason, fatal, requeue)
