"""virtctl-py's decisions: emitted manifests, errors and exit codes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from shared.kube import Conflict, Forbidden, KubeError, NotFound
from shared.model import RunStrategy, VirtualMachine
from shared.model.validation import validate_vm
from tests.unit.importcheck import loaded_by
from virtctl_py import cli, completion, manifests
from virtctl_py.dispatch import explain
from virtctl_py.errors import CliError, Exit
from virtctl_py.main import main
from virtctl_py.output import epoch_time, render
from virtctl_py.session import Target


def test_create_vm_validates_with_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    """create vm prints a VirtualMachine that the shared model parses and validates."""
    main(
        [
            "create",
            "vm",
            "--name",
            "demo",
            "--volume-containerdisk",
            "src:registry.local/x:v1,name:root,bootorder:1",
            "--user-data",
            "#cloud-config",
        ]
    )
    vm = VirtualMachine.from_dict(yaml.safe_load(capsys.readouterr().out))
    assert validate_vm(vm) == []
    assert vm.spec.run_strategy == RunStrategy.ALWAYS


def test_create_vm_needs_a_disk() -> None:
    """Without a disk or kernel image there is nothing to boot: a usage error."""
    flags = manifests.VMFlags(
        name="x", namespace=None, memory="1Gi", cpus=1, run_strategy=RunStrategy.ALWAYS,
    )  # fmt: skip
    with pytest.raises(CliError) as info:
        manifests.vm_manifest(flags)
    assert info.value.code == Exit.USAGE


def test_expose_needs_labels() -> None:
    """A Service needs a selector; an unlabelled VMI gets a message saying what to do."""
    with pytest.raises(CliError, match="add labels"):
        manifests.service_manifest(
            name="s", namespace="ns", selector={}, port=22, target_port=22, service_type="ClusterIP"
        )


@pytest.mark.parametrize(
    ("error", "code", "text"),
    [
        pytest.param(
            NotFound(404, "NotFound", "nope"), Exit.NOT_FOUND, "not found", id="not-found"
        ),
        pytest.param(
            Forbidden(403, "Forbidden", "denied"),
            Exit.FORBIDDEN,
            "kubevirt.io:edit",
            id="forbidden",
        ),
        pytest.param(
            Conflict(409, "Conflict", "VM is already running"),
            Exit.CONFLICT,
            "VM is already running",
            id="conflict-keeps-the-apis-reason",
        ),
    ],
)
def test_errors_name_the_object_and_exit_code(error: KubeError, code: Exit, text: str) -> None:
    """API errors become messages that name the object and the fix, with distinct exit codes."""
    args = argparse.Namespace(command="pause", kind="vmi", name="vm1")
    target = Target(kubeconfig=Path("/k"), context=None, namespace="ns")
    err = explain(error, args, target)
    assert err.code == code
    assert "vmi ns/vm1" in str(err) and text in str(err)


def test_output_formats() -> None:
    """Data commands print tables, JSON or YAML."""
    data = {"items": [{"userName": "root", "domain": "", "loginTime": 5}]}
    columns = (("USER", "userName"), ("LOGIN-TIME", "loginTime"))
    assert render(data, fmt="table", columns=columns).splitlines() == [
        "USER   LOGIN-TIME",
        "root   5",
    ]
    assert json.loads(render(data, fmt="json")) == data
    assert yaml.safe_load(render(data, fmt="yaml")) == data


def test_userlist_login_time_is_readable_in_the_table() -> None:
    """The agent's login time (epoch seconds, fractional) shows as a UTC time in the table;
    JSON keeps the raw number, as KubeVirt's virtctl prints it."""
    data = {"items": [{"userName": "root", "domain": "", "loginTime": 1764102065.25}]}
    columns = (("USER", "userName"), ("LOGIN-TIME", "loginTime"))
    shown = render(data, fmt="table", columns=columns, formats={"loginTime": epoch_time})
    assert shown.splitlines()[1].split() == ["root", "2025-11-25T20:21:05Z"]
    assert json.loads(render(data, fmt="json", formats={"loginTime": epoch_time})) == data
    assert epoch_time("soon") == "soon"


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_lists_verbs_and_their_flags(shell: str) -> None:
    """bash and zsh scripts offer every verb, then that verb's flags (kubectl's included)."""
    script = completion.script(cli.build(), shell)
    for verb in ("start", "migrate-cancel", "console", "fslist", "completion"):
        assert verb in script
    start = next(line for line in script.splitlines() if line.strip().startswith("start)"))
    for flag in ("--paused", "--dry-run", "--wait", "--namespace", "--context", "--as"):
        assert flag in start
    assert ("compdef _virtctl_py" if shell == "zsh" else "complete -F _virtctl_py") in script


def test_run_strategy_choices_are_kubevirts() -> None:
    """The CLI's spelled-out runStrategies are exactly the model's, but WaitAsReceiver:
    a decentralized migration's receiving VM, which KubeVirt's virtctl create vm does not
    offer either."""
    offered = {str(s) for s in RunStrategy} - {RunStrategy.WAIT_AS_RECEIVER}
    assert sorted(cli.RUN_STRATEGIES) == sorted(offered)


def test_help_loads_no_client() -> None:
    """`virtctl-py --help` parses with argparse alone: neither the Kubernetes client, aiohttp
    nor the model is imported (what keeps the answer immediate)."""
    code = (
        "from virtctl_py.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
    )
    heavy = ("aiohttp", "shared.kube", "shared.model", "kubernetes_asyncio")
    loaded, out = loaded_by(code, heavy)
    assert loaded == [], out
