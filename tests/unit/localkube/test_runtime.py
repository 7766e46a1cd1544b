"""How the node agent turns volumeMounts into bind mounts (localkube.nodeagent.runtime,
worker): subPathExpr, and binds made before read-only remounts."""

from __future__ import annotations

from pathlib import Path

import pytest

from localkube.nodeagent.podspec import Container
from localkube.nodeagent.refs import ConfigError
from localkube.nodeagent.runtime import Mount, prologue
from localkube.nodeagent.worker import _binds


def test_read_only_remounts_come_after_every_bind() -> None:
    """A bind inherits the read-only flag of its source's mount, so a writable subPath of
    a host dir that is also mounted read-only is bound before the read-only remount."""
    script = prologue(
        [
            Mount(source=Path("/var/lib/kvpy"), target="/var/lib/kvpy", read_only=True),
            Mount(
                source=Path("/var/lib/kvpy/node01/device-plugins"),
                target="/var/lib/kubelet/device-plugins",
            ),
        ],
        "/",
    )
    lines = script.splitlines()
    binds = [i for i, line in enumerate(lines) if line.startswith("mount --bind")]
    remount = lines.index("mount -o remount,bind,ro /var/lib/kvpy")
    assert len(binds) == 2
    assert max(binds) < remount


def test_sub_path_expr_expands_with_the_container_env(tmp_path: Path) -> None:
    """subPathExpr's $(VAR) references expand with the container's env, and the subpath
    directory is made when missing, as kubelet does."""
    spec = Container.from_dict(
        {
            "name": "c",
            "image": "i",
            "volumeMounts": [
                {"name": "v", "mountPath": "/m", "subPathExpr": "$(NODE_NAME)/device-plugins"}
            ],
        }
    )
    binds = _binds(spec, {"v": tmp_path}, {"NODE_NAME": "node01"})
    assert binds == [Mount(source=tmp_path / "node01" / "device-plugins", target="/m")]
    assert (tmp_path / "node01" / "device-plugins").is_dir()


@pytest.mark.parametrize("sub", ["../escape", "/abs"])
def test_sub_path_must_stay_inside_the_volume(tmp_path: Path, sub: str) -> None:
    """A subPath that is absolute or climbs out with '..' is a configuration error."""
    spec = Container.from_dict(
        {
            "name": "c",
            "image": "i",
            "volumeMounts": [{"name": "v", "mountPath": "/m", "subPath": sub}],
        }
    )
    with pytest.raises(ConfigError, match="must stay inside"):
        _binds(spec, {"v": tmp_path}, {})
