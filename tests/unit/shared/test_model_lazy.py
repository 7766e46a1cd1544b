"""shared.model loads its submodules on first use: its exports stay whole, a VMI's user
(the launcher) loads no VM, pool, instance type or KubeVirt CR model."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from shared import model
from tests.unit.importcheck import loaded_by

INIT = Path(model.__file__)


def _type_checking_imports() -> dict[str, set[str]]:
    """The names the ``if TYPE_CHECKING:`` block imports, by submodule."""
    tree = ast.parse(INIT.read_text())
    block = next(
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    )
    found: dict[str, set[str]] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module is not None
        found.setdefault(node.module.removeprefix("shared.model."), set()).update(
            a.name for a in node.names
        )
    return found


def test_the_lazy_table_matches_the_typed_imports_and_all() -> None:
    """What type checkers see (the TYPE_CHECKING imports), what __getattr__ loads (its
    table) and __all__ name the same things, so no export is typed but missing."""
    table = {module: set(names.split()) for module, names in model._EXPORTS.items()}
    assert table == _type_checking_imports()
    eager = {"API_VERSION", "GROUP", "VERSION"}
    assert set(model.__all__) == set().union(*table.values()) | eager


def test_every_export_is_its_submodules_object() -> None:
    """Each name of __all__ resolves to the object its submodule defines."""
    for module, names in model._EXPORTS.items():
        sub = importlib.import_module(f"shared.model.{module}")
        for name in names.split():
            assert getattr(model, name) is getattr(sub, name), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    """A name shared.model does not export raises AttributeError (hasattr stays False)."""
    assert not hasattr(model, "NoSuchModel")


def test_the_launcher_loads_no_vm_pool_or_instancetype_model() -> None:
    """Importing everything a Sync needs (launcher.serve) and validating a VMI loads
    neither the VM, the pool, the instance type and preference, the KubeVirt CR, the VMIM
    nor their validation, nor the zone database (a clock's timezone loads it when
    validated)."""
    code = (
        "import launcher.serve\n"
        "from shared.model.validation import validate_vmi\n"
        "from shared.model import VirtualMachineInstance\n"
    )
    heavy = (
        "shared.model.vm", "shared.model.replicaset", "shared.model.instancetype",
        "shared.model.preference", "shared.model.pool", "shared.model.kubevirt",
        "shared.model.migration", "zoneinfo",
    )  # fmt: skip
    loaded, out = loaded_by(code, heavy)
    assert loaded == [], out
