"""The suite's session fixtures (one process-mode and one real-node cluster, one deploy of
kubevirt-py onto the latter) are registered once, in tests/conftest.py's `pytest_plugins`.
A test module or conftest that imported one of them would own a second session instance:
for `real_stack`, a second deploy onto the same cluster with a new serving certificate that
the running virt-api never loads, so its APIService never becomes Available (the CI failure
of stop 40). This test fails if any module under tests/ imports a name those plugin modules
define as a fixture."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from tests import conftest

TESTS = Path(__file__).resolve().parents[1]


def _session_fixture_names() -> dict[str, set[str]]:
    """Plugin module → the fixtures it defines (by their decorator, read from its source)."""
    found: dict[str, set[str]] = {}
    for module_name in conftest.pytest_plugins:
        module = importlib.import_module(module_name)
        tree = ast.parse(Path(str(module.__file__)).read_text())
        names = {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef)
            and any("fixture" in ast.unparse(d) for d in node.decorator_list)
        }
        found[module_name] = names
    return found


def test_plugins_define_the_session_clusters() -> None:
    """Both clusters' session fixtures are in the registered plugin modules."""
    defined = set().union(*_session_fixture_names().values())
    assert {"kube_cluster", "real_cluster", "real_kubectl", "real_stack"} <= defined


def test_no_module_imports_a_session_fixture() -> None:
    """No module under tests/ imports a fixture function from a registered plugin module or
    from another test package (the real-node ones used to live in a conftest)."""
    plugins = _session_fixture_names()
    fixtures = set().union(*plugins.values())
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.module is None:
                continue
            from_tests = node.module in plugins or node.module.startswith("tests.integration.")
            if from_tests and (imported := {alias.name for alias in node.names} & fixtures):
                offenders.append(f"{path.relative_to(TESTS)} imports {sorted(imported)}")
    assert not offenders, offenders
