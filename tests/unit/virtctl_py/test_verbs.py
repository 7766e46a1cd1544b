"""start / stop / restart / migrate are PUTs on KubeVirt's VM subresources, with its bodies."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from shared.kube.errors import NotFound
from shared.kube.resources import Resource
from virtctl_py import cli, commands, lifecycle
from virtctl_py.errors import CliError, Exit
from virtctl_py.session import Target

TARGET = Target(kubeconfig=Path("/k"), context=None, namespace="ns")


class FakeApi:
    """Records subresource calls; VMIMs appear after a migrate PUT."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, str, dict[str, Any]]] = []
        self.migrations: list[dict[str, Any]] = []
        self.datavolumes: set[str] = set()

    def subresource(
        self, method: str, resource: Resource, name: str, *, namespace: str | None,
        subresource: str, body: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        path = resource.path(namespace=namespace, name=name, subresource=subresource)
        self.calls.append((method, path, name, subresource, dict(body or {})))
        if subresource == "migrate":
            self.migrations.append(
                {"metadata": {"name": "kubevirt-migrate-vm-x"}, "spec": {"vmiName": name},
                 "status": {"phase": "Succeeded"}}
            )  # fmt: skip
        return {}

    def list(self, resource: Resource, *, namespace: str | None = None) -> list[dict[str, Any]]:
        return list(self.migrations)

    def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> Any:
        if resource.plural == "datavolumes":
            if name in self.datavolumes:
                return {"metadata": {"name": name}}
            raise NotFound(404, "NotFound", f"datavolumes {name} not found")
        raise AssertionError(f"no read expected of {resource.plural}/{name}")


def parse(*argv: str) -> argparse.Namespace:
    return cli.build().parse_args(list(argv))


@pytest.mark.parametrize(
    ("argv", "body"),
    [
        pytest.param(["start", "demo"], {}, id="start"),
        pytest.param(["start", "demo", "--paused", "--dry-run"],
                     {"paused": True, "dryRun": ["All"]}, id="start-paused-dry"),
        pytest.param(["stop", "demo"], {}, id="stop"),
        pytest.param(["stop", "demo", "--force", "--grace-period", "0"], {"gracePeriod": 0},
                     id="stop-force"),
        pytest.param(["restart", "demo", "--force", "--grace-period=0"],
                     {"gracePeriodSeconds": 0}, id="restart-force"),
        pytest.param(["migrate", "demo", "--dry-run"], {"dryRun": ["All"]}, id="migrate-dry"),
    ],
)  # fmt: skip
def test_verbs_put_kubevirts_options(argv: list[str], body: dict[str, Any]) -> None:
    """Each verb is one PUT on virtualmachines/<name>/<verb> with KubeVirt's options body,
    and prints upstream virtctl's line."""
    kube = FakeApi()
    args = parse(*argv)
    verb = commands.migrate if args.command == "migrate" else commands.vm_state
    out = verb(cast(Any, kube), TARGET, args)
    ((method, path, name, sub, sent),) = kube.calls
    assert method == "PUT"
    assert path == f"/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/demo/{sub}"
    assert (name, sub, sent) == ("demo", args.command, body)
    assert out.endswith(f"VM demo was scheduled to {args.command}")


def test_migrate_wait_follows_the_new_vmim() -> None:
    """migrate --wait finds the VMIM the API created and waits for it to succeed."""
    kube = FakeApi()
    out = commands.migrate(cast(Any, kube), TARGET, parse("migrate", "demo", "--wait"))
    assert out == "VM demo was scheduled to migrate"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["stop", "demo", "--grace-period", "3"], "must be used with --force",
                     id="grace-without-force"),
        pytest.param(["restart", "demo", "--force"], "--force needs --grace-period", id="force"),
    ],
)  # fmt: skip
def test_flag_misuse_is_a_usage_error(argv: list[str], message: str) -> None:
    """--grace-period and --force go together, as upstream virtctl's."""
    with pytest.raises(CliError, match=message) as caught:
        commands.verb_options(parse(*argv))
    assert caught.value.code == Exit.USAGE


def test_bodies_are_empty_by_default() -> None:
    """No flag, no field: the API applies KubeVirt's defaults."""
    for verb in ("start", "stop", "restart", "migrate"):
        assert lifecycle.body(verb, lifecycle.VerbOptions()) == {}


def test_answer_into_a_closed_pipe_ends_quietly() -> None:
    """`virtctl-py … | head -1`: the reader leaving ends the command with exit 0 and no
    traceback, as kubectl does."""
    code = (
        "import sys; from virtctl_py import dispatch as m; "
        "m._print('\\n'.join(str(i) for i in range(200000)))"
    )
    proc = subprocess.run(
        f"{sys.executable} -c \"{code}\" | head -1",
        shell=True, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.stdout == "0\n" and "Traceback" not in proc.stderr


def test_addvolume_and_removevolume_bodies_and_paths() -> None:
    """addvolume/removevolume PUT AddVolumeOptions/RemoveVolumeOptions as upstream virtctl:
    on the VMI, or with --persist on the VM; the claim names the volume, disk and serial."""
    kube = FakeApi()
    out = commands.volume(cast(Any, kube), TARGET, parse("addvolume", "vm1", "--volume-name=data"))
    assert out == "Successfully submitted add volume request to VM vm1 for volume data"
    commands.volume(
        cast(Any, kube), TARGET,
        parse("removevolume", "vm1", "--volume-name=data", "--persist", "--dry-run"),
    )  # fmt: skip
    (_, add_path, _, _, add), (_, remove_path, _, _, remove) = kube.calls
    assert add_path.endswith("/namespaces/ns/virtualmachineinstances/vm1/addvolume")
    assert add == {
        "name": "data",
        "disk": {"name": "data", "serial": "data", "disk": {"bus": "scsi"}},
        "volumeSource": {"persistentVolumeClaim": {"claimName": "data", "hotpluggable": True}},
    }
    assert remove_path.endswith("/namespaces/ns/virtualmachines/vm1/removevolume")
    assert remove == {"name": "data", "dryRun": ["All"]}


def test_addvolume_of_a_datavolume_sends_a_datavolume_source() -> None:
    """A DataVolume of the volume's name exists: addvolume sends a dataVolume source (as
    upstream virtctl decides), hotpluggable; removevolume reads nothing."""
    kube = FakeApi()
    kube.datavolumes.add("dv1")
    commands.volume(cast(Any, kube), TARGET, parse("addvolume", "vm1", "--volume-name=dv1"))
    commands.volume(cast(Any, kube), TARGET, parse("removevolume", "vm1", "--volume-name=dv1"))
    (_, _, _, _, add), (_, _, _, _, remove) = kube.calls
    assert add["volumeSource"] == {"dataVolume": {"name": "dv1", "hotpluggable": True}}
    assert remove == {"name": "dv1"}
