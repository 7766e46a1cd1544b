"""Configuration: flags, environment defaults and the launcher command split like a shell."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.config import Config
from controller.errors import ConfigError


def test_defaults_are_kubevirts() -> None:
    """No flags: 10 VMI workers, 5/2 migration limits, 5-minute timeouts, emulation allowed."""
    cfg = Config.from_args([], environ={})
    assert cfg.workers.vmi == 10 and cfg.workers.vm == 3
    assert (cfg.migration.parallel_per_cluster, cfg.migration.outbound_per_node) == (5, 2)
    assert cfg.timing.heartbeat_timeout == 300 and cfg.timing.vmi_unschedulable_timeout == 300
    assert cfg.template.use_emulation is True
    assert cfg.kubeconfig is None and cfg.namespace == ""
    assert cfg.leader.identity


def test_environment_supplies_defaults_and_flags_win() -> None:
    """VIRT_CONTROLLER_<FLAG> sets a default; the command line overrides it."""
    env = {"VIRT_CONTROLLER_LAUNCHER_IMAGE": "a/b:c", "VIRT_CONTROLLER_USE_EMULATION": "false"}
    cfg = Config.from_args(["--kubeconfig", "/k", "--parallel-migrations", "1"], environ=env)
    assert cfg.template.launcher_image == "a/b:c"
    assert cfg.template.use_emulation is False
    assert cfg.kubeconfig == Path("/k")
    assert cfg.migration.parallel_per_cluster == 1


def test_launcher_command_is_split_like_a_shell() -> None:
    """Quoted words stay together."""
    cfg = Config.from_args(["--launcher-command", "sh -c 'exec python -m x' launcher"], environ={})
    assert cfg.template.launcher_command == ("sh", "-c", "exec python -m x", "launcher")


def test_bad_boolean_is_a_config_error() -> None:
    """A value that is not a boolean is refused with the flag's value in the message."""
    with pytest.raises(ConfigError, match="maybe"):
        Config.from_args(["--use-emulation", "maybe"], environ={})


def test_cpu_allocation_ratio_sets_the_request_per_vcpu() -> None:
    """KubeVirt's cpuAllocationRatio: 10 (default) → 100m per vCPU, 50 → 20m; 0 is refused."""
    assert Config.from_args([], environ={}).template.cpu_request_millis_per_vcpu == 100
    cfg = Config.from_args(["--cpu-allocation-ratio", "50"], environ={})
    assert cfg.template.cpu_request_millis_per_vcpu == 20
    with pytest.raises(ConfigError, match="cpu-allocation-ratio"):
        Config.from_args(["--cpu-allocation-ratio", "0"], environ={})
