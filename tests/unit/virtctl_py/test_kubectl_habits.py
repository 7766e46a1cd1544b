"""virtctl-py behaves like kubectl: flags anywhere, merged KUBECONFIG, connection flags,
upstream virtctl's flag names and units."""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

from virtctl_py import cli, dispatch, kubeconfig, objects, session
from virtctl_py import console as console_module
from virtctl_py.errors import CliError, Exit
from virtctl_py.kubeconfig import Overrides


def parse(*argv: str) -> argparse.Namespace:
    return cli.build().parse_args(list(argv))


def write(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


def config(name: str, server: str, *, current: str | None = None, **user: Any) -> dict[str, Any]:
    """A kubeconfig with one cluster, user and context, all called `name`."""
    out: dict[str, Any] = {
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": name, "user": user or {"token": f"{name}-token"}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    }
    if current:
        out["current-context"] = current
    return out


@pytest.mark.parametrize(
    "argv",
    [
        ["start", "demo", "-n", "ns", "--context", "c"],
        ["-n", "ns", "--context", "c", "start", "demo"],
        ["--namespace=ns", "start", "--context=c", "demo"],
    ],
)
def test_flags_anywhere(argv: list[str]) -> None:
    """Connection flags are accepted before, after or between the verb's arguments."""
    args = parse(*argv)
    assert (args.command, args.name, args.namespace, args.context) == ("start", "demo", "ns", "c")


def test_flag_after_the_verb_wins_and_defaults_stay() -> None:
    """A flag repeated after the verb wins; flags not given keep their defaults."""
    args = parse("-n", "a", "pause", "vmi", "x", "-n", "b")
    assert (args.namespace, args.server, args.insecure_skip_tls_verify) == ("b", None, False)
    assert parse("create", "vm", "--name", "x", "-n", "team").namespace == "team"


def test_kubeconfig_paths_follow_kubectl() -> None:
    """--kubeconfig alone; else every $KUBECONFIG entry (empties skipped, duplicates once);
    else ~/.kube/config."""
    home = Path("/home/u")
    env = {"KUBECONFIG": f"/a{os.pathsep}{os.pathsep}/b{os.pathsep}/a"}
    assert kubeconfig.kubeconfig_paths("/x", env, home) == [Path("/x")]
    assert kubeconfig.kubeconfig_paths(None, env, home) == [Path("/a"), Path("/b")]
    assert kubeconfig.kubeconfig_paths(None, {}, home) == [home / ".kube" / "config"]


def test_merge_first_definition_wins(tmp_path: Path) -> None:
    """kubectl's merge: the first file defining a name wins, as does the first
    current-context; relative certificate paths resolve against their own file."""
    first = config("shared", "https://first:6443")
    first["clusters"][0]["cluster"]["certificate-authority"] = "ca.crt"
    second = config("shared", "https://second:6443", current="other")
    second["contexts"].append({"name": "other", "context": {"cluster": "shared", "user": "shared"}})
    (tmp_path / "sub").mkdir()
    a = kubeconfig.load(write(tmp_path / "a", first))
    b = kubeconfig.load(write(tmp_path / "sub" / "b", second))
    assert a is not None and b is not None
    merged = kubeconfig.merge([a, b])
    assert [c["cluster"]["server"] for c in merged["clusters"]] == ["https://first:6443"]
    assert merged["clusters"][0]["cluster"]["certificate-authority"] == str(tmp_path / "ca.crt")
    assert [c["name"] for c in merged["contexts"]] == ["shared", "other"]
    assert merged["current-context"] == "other"
    assert kubeconfig.load(tmp_path / "missing") is None


def test_overrides_build_one_context() -> None:
    """--context picks, --server replaces the address, --token replaces every other
    credential, --insecure-skip-tls-verify drops the CA, -n sets the namespace."""
    base = config("c", "https://old:6443", exec={"command": "helper"})
    base["clusters"][0]["cluster"]["certificate-authority-data"] = "Q0E="
    out = kubeconfig.override(
        base,
        Overrides(
            context="c", server="https://new:6443", token="t0k", namespace="ns",
            insecure_skip_tls_verify=True,
        ),
    )  # fmt: skip
    (cluster,), (user,) = out["clusters"], out["users"]
    assert cluster["cluster"] == {"server": "https://new:6443", "insecure-skip-tls-verify": True}
    assert user["user"] == {"token": "t0k"}
    assert kubeconfig.namespace_of(out, None) == "ns"


def test_server_alone_needs_no_kubeconfig() -> None:
    """--server with --token works without any kubeconfig (kubectl does too)."""
    out = kubeconfig.override(kubeconfig.merge([]), Overrides(server="https://h:1", token="t"))
    assert out["clusters"][0]["cluster"]["server"] == "https://h:1"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param(Overrides(context="nope"), 'context "nope" is not in', id="context"),
        pytest.param(Overrides(), "pass --context or --server", id="nothing"),
    ],
)
def test_override_errors_are_usage_errors(overrides: Overrides, message: str) -> None:
    """An unknown context, or no way to find a server: exit 2 with what to pass."""
    with pytest.raises(CliError, match=message) as caught:
        kubeconfig.override(kubeconfig.merge([]), overrides)
    assert caught.value.code == Exit.USAGE


def test_resolved_writes_a_private_merged_file(tmp_path: Path) -> None:
    """Several KUBECONFIG paths: a 0600 merged file with the second file's current context,
    gone once the command ends; one path and no override: the file itself is used."""
    a = write(tmp_path / "a", config("a", "https://a:1"))
    b = write(tmp_path / "b", config("b", "https://b:1", current="b"))
    env = {"KUBECONFIG": f"{a}{os.pathsep}{b}"}
    with session.resolved(Overrides(), kubeconfig_flag=None, environ=env, home=tmp_path) as t:
        assert stat.S_IMODE(t.kubeconfig.stat().st_mode) == 0o600
        written = yaml.safe_load(t.kubeconfig.read_text())
        assert written["clusters"][0]["cluster"]["server"] == "https://b:1"
        path = t.kubeconfig
    assert not path.exists()
    with session.resolved(
        Overrides(context="a"), kubeconfig_flag=str(a), environ={}, home=tmp_path
    ) as t:
        assert (t.kubeconfig, t.context) == (a, "a")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30", 30.0), ("30s", 30.0), ("2m", 120.0), ("500ms", 0.5), ("1h", 3600.0), ("0", 3600.0)],
)
def test_request_timeout_units(text: str, seconds: float) -> None:
    """--request-timeout as kubectl reads it; "0" (no limit) still bounds the call."""
    assert session.request_timeout(text) == seconds


def test_request_timeout_refuses_nonsense() -> None:
    """An unreadable duration is a usage error naming the format."""
    with pytest.raises(CliError, match="30s"):
        session.request_timeout("soon")


def test_impersonation_headers() -> None:
    """--as and each --as-group become Impersonate-* headers; the kubeconfig's `as` is the
    fallback; groups without a user are refused."""
    base = config("c", "https://h:1", current="c", token="t", **{"as": "kc-user"})
    flags = Overrides(impersonate="alice", impersonate_groups=("g1", "g2"))
    assert kubeconfig.impersonation(base, None, flags) == (
        ("Impersonate-User", "alice"), ("Impersonate-Group", "g1"), ("Impersonate-Group", "g2"),
    )  # fmt: skip
    assert kubeconfig.impersonation(base, None, Overrides()) == (("Impersonate-User", "kc-user"),)
    with pytest.raises(CliError, match="--as-group needs --as"):
        kubeconfig.impersonation({}, None, Overrides(impersonate_groups=("g",)))


async def test_connection_flags_reach_the_wire(tmp_path: Path) -> None:
    """--server, --token and --as/--as-group are what the API server receives."""
    seen: list[Any] = []

    async def version(request: web.Request) -> web.Response:
        seen.append(request.headers)
        return web.json_response({"gitVersion": "v0"})

    app = web.Application()
    app.router.add_get("/apis/subresources.kubevirt.io/v1/version", version)
    async with TestServer(app) as server:
        args = parse(
            "version", "--server", str(server.make_url("")).rstrip("/"), "--token", "s3cret",
            "--as", "alice", "--as-group", "g1", "--as-group", "g2", "--request-timeout", "5s",
        )  # fmt: skip
        with session.resolved(
            dispatch.overrides(args), kubeconfig_flag=None, timeout=args.request_timeout,
            environ={}, home=tmp_path,
        ) as target:  # fmt: skip
            assert target.request_timeout == 5.0
            out = await asyncio.to_thread(dispatch.answer, args, target)
    assert "Server Version: v0" in out
    (headers,) = seen
    assert headers["Authorization"] == "Bearer s3cret"
    assert headers["Impersonate-User"] == "alice"
    assert headers.getall("Impersonate-Group") == ["g1", "g2"]


def test_console_timeout_is_in_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    """console --timeout counts minutes (upstream's unit), default 5."""
    waited: list[float] = []

    async def fake_console(target: Any, name: str, *, timeout: float) -> str:
        waited.append(timeout)
        return ""

    monkeypatch.setattr(console_module, "console", fake_console)
    target = session.Target(kubeconfig=Path("/k"), context=None, namespace="ns")
    asyncio.run(dispatch.run(parse("console", "demo"), target))
    asyncio.run(dispatch.run(parse("console", "demo", "--timeout", "2"), target))
    assert waited == [300.0, 120.0]


def create(*flags: str) -> dict[str, Any]:
    return dict(yaml.safe_load(objects.create_vm(parse("create", "vm", *flags), None)))


def test_create_vm_upstream_volume_flags() -> None:
    """--volume-containerdisk / --volume-pvc take upstream's src:,name:,bootorder: form."""
    vm = create(
        "--name", "v", "--volume-containerdisk", "src:reg.local:5000/img:v1,name:root,bootorder:1",
        "--volume-pvc", "src:data",
    )  # fmt: skip
    spec = vm["spec"]["template"]["spec"]
    assert spec["volumes"] == [
        {"name": "root", "containerDisk": {"image": "reg.local:5000/img:v1"}},
        {"name": "v-pvc-1", "persistentVolumeClaim": {"claimName": "data"}},
    ]
    assert spec["domain"]["devices"]["disks"][0] == {
        "name": "root", "disk": {"bus": "virtio"}, "bootOrder": 1,
    }  # fmt: skip


def test_create_vm_instancetype_preference_and_user_data() -> None:
    """--instancetype/--preference ([kind/]name) replace the memory and CPU defaults;
    --cloud-init-user-data is base64 as upstream's."""
    data = base64.b64encode(b"#cloud-config\nhostname: v\n").decode()
    vm = create(
        "--name", "v", "--volume-containerdisk", "reg/img:v1", "--instancetype", "u1.small",
        "--preference", "virtualmachinepreference/fedora", "--cloud-init-user-data", data,
    )  # fmt: skip
    assert vm["spec"]["instancetype"] == {
        "kind": "virtualmachineclusterinstancetype", "name": "u1.small",
    }  # fmt: skip
    assert vm["spec"]["preference"] == {"kind": "virtualmachinepreference", "name": "fedora"}
    domain = vm["spec"]["template"]["spec"]["domain"]
    assert "memory" not in domain and "cpu" not in domain
    volumes = vm["spec"]["template"]["spec"]["volumes"]
    assert volumes[-1]["cloudInitNoCloud"]["userData"] == "#cloud-config\nhostname: v\n"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(["--volume-pvc", "src:x,size:1Gi"], "unknown parameter", id="param"),
        pytest.param(["--volume-pvc", "name:x"], "src: is required", id="no-src"),
        pytest.param(
            ["--volume-pvc", "src:x", "--cloud-init-user-data", "!!"], "base64", id="not-base64"
        ),
    ],
)
def test_create_vm_flag_errors(flags: list[str], message: str) -> None:
    """Malformed upstream-style flags: a usage error saying what is wrong."""
    with pytest.raises(CliError, match=message) as caught:
        create("--name", "v", *flags)
    assert caught.value.code == Exit.USAGE
