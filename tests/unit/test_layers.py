"""The layering rules hold: daemons never import each other, virt_api imports only shared
(the controller process serves it, from controller/main.py alone), libvirt, kubernetes-asyncio
and grpc stay behind their one door each, no import circles, and the test bed (localkube) stays
out of the product."""

from __future__ import annotations

import ast
import functools
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAEMONS = (
    "launcher",
    "handler",
    "controller",
    "virt_api",
    "virtctl_py",
    "exportserver",
    "importer",
)
# The one place a daemon may import another package of DAEMONS: the controller process
# serves virt-api.
ALLOWED = {"controller/main.py": {"virt_api"}}
LIBVIRT_MODULES = {"libvirt", "libvirt_qemu", "libvirtaio"}
LIBVIRT_DOOR = "launcher/virt.py"
KUBE_DOOR = "shared/kube/"
GRPC_DOOR = "shared/deviceplugin/rpc.py"
CSI_GRPC_DOOR = "localkube/csi/rpc.py"  # the test bed's CSI driver (its own protocol)


@functools.cache
def _tree(path: Path) -> ast.Module:
    """Each file parsed once for every test of the module (about 0.6 s a pass)."""
    return ast.parse(path.read_text(), filename=str(path))


@functools.cache
def _imports(path: Path) -> frozenset[str]:
    """The top-level packages `path` imports anywhere (walked once per file)."""
    names: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return frozenset(names)


def _product_files() -> list[Path]:
    return [p for pkg in (*DAEMONS, "shared") for p in (REPO / pkg).rglob("*.py")]


@pytest.mark.parametrize("daemon", DAEMONS)
def test_daemons_do_not_import_each_other(daemon: str) -> None:
    """A daemon package imports shared and itself, never another daemon."""
    others = set(DAEMONS) - {daemon}
    offenders = {
        rel: sorted(found)
        for p in (REPO / daemon).rglob("*.py")
        if (found := _imports(p) & others - ALLOWED.get(rel := str(p.relative_to(REPO)), set()))
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
    only through shared/deviceplugin/rpc.py; the test bed's CSI driver through its own
    one door, localkube/csi/rpc.py."""
    files = [*_product_files(), *(REPO / "localkube").rglob("*.py")]
    offenders = [
        str(p.relative_to(REPO))
        for p in files
        if "grpc" in _imports(p) and str(p.relative_to(REPO)) not in (GRPC_DOOR, CSI_GRPC_DOOR)
    ]
    assert offenders == []


def test_product_never_imports_the_test_bed() -> None:
    """The daemons and shared never import localkube: in particular the local image store
    (localkube/imagestore.py) is test-bed only; launchers read containerDisk and kernelBoot
    files where the pod's init containers copied them."""
    offenders = [str(p.relative_to(REPO)) for p in _product_files() if "localkube" in _imports(p)]
    assert offenders == []
    assert not (REPO / "shared" / "images.py").exists()


def test_virt_api_imports_no_controller_module() -> None:
    """virt_api stands on shared alone: nothing under virt_api/ imports controller."""
    offenders = [
        str(p.relative_to(REPO))
        for p in (REPO / "virt_api").rglob("*.py")
        if "controller" in _imports(p)
    ]
    assert offenders == []


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _import_graph() -> dict[str, set[str]]:
    """Module → the project modules it imports at module level (absolute imports)."""
    files = {_module_of(p): p for p in _product_files()}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        found: set[str] = set()
        for node in _tree(path).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                submodules = {f"{node.module}.{a.name}" for a in node.names} & files.keys()
                # `from pkg import submodule` imports the submodule, not pkg's re-exports.
                found.update(submodules or ({node.module} & files.keys()))
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in files)
        graph[module] = found - {module}
    return graph


def test_no_import_circles() -> None:
    """No circle among the product's modules' top-level imports (package __init__ re-exports
    included), so every module can be read bottom-up."""
    graph = _import_graph()
    done: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            circles.append([*path[path.index(node) :], node])
            return
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, [*path, node])
        done.add(node)

    for module in sorted(graph):
        visit(module, [])
    assert circles[:3] == []


def test_test_bed_is_not_packaged() -> None:
    """The product wheel's packages (pyproject's find.include) name no localkube package, and
    no product image copies it."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    assert not [pattern for pattern in include if pattern.startswith("localkube")]
    images = [p for p in (REPO / "images").glob("Containerfile*") if "localkube" in p.read_text()]
    assert images == []
