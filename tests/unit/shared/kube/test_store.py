"""The cache store and the stock index functions (raw dicts and model objects alike)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.kube.store import (
    NAMESPACE_INDEX,
    NODE_INDEX,
    OWNER_INDEX,
    Store,
    by_namespace,
    by_node,
    by_owner_uid,
    default_indexers,
)
from shared.model import VirtualMachineInstance
from tests.unit.shared.kube.fakes import pod

VMI = VirtualMachineInstance.from_dict(
    {
        "metadata": {
            "name": "v",
            "namespace": "ns",
            "labels": {"kubevirt.io/nodeName": "n1"},
            "ownerReferences": [{"uid": "vm-uid", "kind": "VirtualMachine"}],
        }
    }
)


@pytest.mark.parametrize(
    ("fn", "obj", "expected"),
    [
        pytest.param(by_namespace, pod("a", "1"), ["ns"], id="ns-raw"),
        pytest.param(by_namespace, {"metadata": {"name": "node1"}}, [], id="ns-cluster-scoped"),
        pytest.param(by_namespace, VMI, ["ns"], id="ns-model"),
        pytest.param(by_node, pod("a", "1", node="n9"), ["n9"], id="node-spec"),
        pytest.param(
            by_node,
            pod("a", "1", node="n9", labels={"kubevirt.io/nodeName": "n1"}),
            ["n1"],
            id="node-label-wins",
        ),
        pytest.param(by_node, pod("a", "1"), [], id="node-unscheduled"),
        pytest.param(by_node, VMI, ["n1"], id="node-model"),
        pytest.param(by_owner_uid, pod("a", "1", owner="u1"), ["u1"], id="owner-raw"),
        pytest.param(by_owner_uid, VMI, ["vm-uid"], id="owner-model"),
    ],
)
def test_stock_index_functions(fn: Any, obj: Any, expected: list[str]) -> None:
    """Each stock index function files an object under the expected values."""
    assert fn(obj) == expected


def test_upsert_moves_object_between_index_values() -> None:
    """Replacing an object refiles it; the old index value disappears when empty."""
    store: Store[dict[str, Any]] = Store(default_indexers())
    assert store.upsert("ns/a", pod("a", "1", node="n1")) is None
    old = store.upsert("ns/a", pod("a", "2", node="n2"))
    assert old is not None and old["metadata"]["resourceVersion"] == "1"
    assert store.index_values(NODE_INDEX) == ["n2"]
    assert [o["metadata"]["name"] for o in store.by_index(NODE_INDEX, "n2")] == ["a"]


def test_remove_unindexes() -> None:
    """Removing an object drops it from every index."""
    store: Store[dict[str, Any]] = Store(default_indexers())
    store.upsert("ns/a", pod("a", "1", node="n1", owner="u"))
    removed = store.remove("ns/a")
    assert removed is not None
    assert store.remove("ns/a") is None
    assert (len(store), store.index_values(OWNER_INDEX), store.index_values(NAMESPACE_INDEX)) == (
        0,
        [],
        [],
    )


def test_custom_index_function() -> None:
    """Index functions are pluggable, and may file one object under several values."""
    store: Store[dict[str, Any]] = Store(
        {"label": lambda o: sorted((o["metadata"].get("labels") or {}).values())}
    )
    store.upsert("ns/a", pod("a", "1", labels={"x": "red", "y": "blue"}))
    store.upsert("ns/b", pod("b", "1", labels={"x": "red"}))
    assert store.index_keys("label", "red") == ["ns/a", "ns/b"]
    assert store.index_keys("label", "blue") == ["ns/a"]


def test_unknown_index_is_an_error() -> None:
    """Asking an index that does not exist raises KeyError."""
    with pytest.raises(KeyError):
        Store[dict[str, Any]]().by_index("nope", "x")


def test_reads() -> None:
    """get, list, keys, len and membership reflect the contents."""
    store: Store[dict[str, Any]] = Store()
    store.upsert("ns/a", pod("a", "1"))
    assert "ns/a" in store and "ns/b" not in store
    assert store.get("ns/b") is None
    assert [o["metadata"]["name"] for o in store.list()] == ["a"]
    assert list(store) == ["ns/a"]
