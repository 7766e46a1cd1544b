"""The layering rules hold: daemons never import each other, libvirt, kubernetes-asyncio
and grpc stay behind their one door each."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAEMONS = ("launcher", "handler", "controller", "virtctl_py")
LIBVIRT_MODULES = {"libvirt", "libvirt_qemu", "libvirtaio"}
LIBVIRT_DOOR = "launcher/virt.py"
KUBE_DOOR = "shared/kube/"
GRPC_DOOR = "shared/deviceplugin/rpc.py"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _product_files() -> list[Path]:
    return [p for pkg in (*DAEMONS, "shared") for p in (REPO / pkg).rglob("*.py")]


@pytest.mark.parametrize("daemon", DAEMONS)
def test_daemons_do_not_import_each_other(daemon: str) -> None:
    """A daemon package imports shared and itself, never another daemon."""
    others = set(DAEMONS) - {daemon}
    offenders = {
        str(p.relative_to(REPO)): sorted(_imports(p) & others)
        for p in (REPO / daemon).rglob("*.py")
        if _imports(p) & others
    }
    assert offenders == {}


def test_shared_imports_no_daemon() -> None:
    """shared is the bottom layer."""
    offenders = [str(p) for p in (REPO / "shared").rglob("*.py") if _imports(p) & set(DAEMONS)]
    assert offenders == []


def test_libvirt_only_in_its_adapter() -> None:
    """Only launcher/virt.py imports libvirt."""
    offenders = [
        str(p.relative_to(REPO))
        for p in _product_files()
        if _imports(p) & LIBVIRT_MODULES and str(p.relative_to(REPO)) != LIBVIRT_DOOR
    ]
    assert offenders == []


def test_kubernetes_asyncio_only_behind_shared_kube() -> None:
    """Product code reaches kubernetes-asyncio only through shared/kube/."""
    offenders = [
        str(p.relative_to(REPO))
        for p in _product_files()
        if "kubernetes_asyncio" in _imports(p)
        and not str(p.relative_to(REPO)).startswith(KUBE_DOOR)
    ]
    assert offenders == []


def test_grpc_only_behind_shared_deviceplugin_rpc() -> None:
    """Product code (the daemons, shared and the local cluster's node agent) reaches grpc
    only through shared/deviceplugin/rpc.py."""
    files = [*_product_files(), *(REPO / "localkube").rglob("*.py")]
    offenders = [
        str(p.relative_to(REPO))
        for p in files
        if "grpc" in _imports(p) and str(p.relative_to(REPO)) != GRPC_DOOR
    ]
    assert offenders == []


def test_product_never_imports_the_test_bed() -> None:
    """The daemons and shared never import localkube: in particular the local image store
    (localkube/imagestore.py) is test-bed only; launchers read containerDisk and kernelBoot
    files where the pod's init containers copied them."""
    offenders = [str(p.relative_to(REPO)) for p in _product_files() if "localkube" in _imports(p)]
    assert offenders == []
    assert not (REPO / "shared" / "images.py").exists()
