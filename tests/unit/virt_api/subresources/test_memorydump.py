"""memorydump / removememorydump (virt_api.subresources.memorydump): the request lands in
the VM's status as Associating (or Dissociating + remove), with a test of the one it
replaces; bad input is refused naming the reason, as KubeVirt's virt-api does."""

from __future__ import annotations

from typing import Any

import pytest

from shared.kube import NotFound as KubeNotFound
from shared.kube.resources import Resource
from virt_api.subresources.errors import BadRequest, Conflict, NotFound, VmiRef
from virt_api.subresources.memorydump import MemoryDumpApi

REF = VmiRef(namespace="ns", name="vm")


def _claim(size: str = "512Mi", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "dump"},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": size}}, **spec}}  # fmt: skip


class FakeApi:
    """The VM, its VMI (128Mi guest, a claim `disk`) and claims; patches recorded."""

    def __init__(self, *, request: dict[str, Any] | None = None, phase: str = "Running") -> None:
        status: dict[str, Any] = {"printableStatus": "Running"}
        if request:
            status["memoryDumpRequest"] = request
        self.objects: dict[tuple[str, str], dict[str, Any]] = {
            ("virtualmachines", "vm"): {"metadata": {"name": "vm"}, "status": status},
            ("virtualmachineinstances", "vm"): {
                "metadata": {"name": "vm"},
                "spec": {
                    "domain": {"memory": {"guest": "128Mi"}},
                    "volumes": [{"name": "disk", "persistentVolumeClaim": {"claimName": "disk"}}],
                },
                "status": {"phase": phase},
            },
            ("persistentvolumeclaims", "dump"): _claim(),
        }
        self.patches: list[list[dict[str, Any]]] = []

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> Any:
        try:
            return self.objects[(resource.plural, name)]
        except KeyError:
            raise KubeNotFound(404, "NotFound", name) from None

    async def create(self, resource: Resource, body: Any, *, namespace: str | None = None) -> Any:
        raise AssertionError("nothing is created")

    async def patch(self, resource: Resource, name: str, patch: Any, **kw: Any) -> Any:
        assert kw["subresource"] == "status"
        self.patches.append(patch)
        return {}


async def test_a_dump_request_lands_as_associating() -> None:
    """A running VMI and a big enough claim: status.memoryDumpRequest {dump, Associating}."""
    api = FakeApi()
    api.objects[("persistentvolumeclaims", "dump")] = _claim("241Mi")  # just enough
    await MemoryDumpApi(api).dump(REF, b'{"claimName": "dump"}')
    (ops,) = api.patches
    assert ops == [{"op": "add", "path": "/status/memoryDumpRequest",
                    "value": {"claimName": "dump", "phase": "Associating"}}]  # fmt: skip


async def test_a_new_dump_to_the_associated_claim_replaces_the_finished_one() -> None:
    """No claimName, a Completed request: the same claim again, testing the old request."""
    old = {"claimName": "dump", "phase": "Completed", "fileName": "f"}
    api = FakeApi(request=old)
    await MemoryDumpApi(api).dump(REF, b"{}")
    (ops,) = api.patches
    assert ops[0] == {"op": "test", "path": "/status/memoryDumpRequest", "value": old}
    assert ops[1]["value"] == {"claimName": "dump", "phase": "Associating"}


@pytest.mark.parametrize(
    ("api", "body", "error", "words"),
    [
        pytest.param(FakeApi(), b"{}", BadRequest, "requires claim name", id="no-claim"),
        pytest.param(FakeApi(phase="Scheduling"), b'{"claimName": "dump"}', Conflict,
                     "VMI is not running", id="stopped"),
        pytest.param(FakeApi(), b'{"claimName": "nope"}', NotFound, '"nope" not found',
                     id="missing-claim"),
        pytest.param(FakeApi(), b'{"claimName": "disk"}', Conflict,
                     "pvc [disk] is in use by volume [disk]", id="in-use"),
        pytest.param(FakeApi(request={"claimName": "dump", "phase": "InProgress"}),
                     b'{"claimName": "dump"}', Conflict, "already in progress", id="underway"),
        pytest.param(FakeApi(request={"claimName": "other", "phase": "Completed"}),
                     b'{"claimName": "dump"}', Conflict, "still associated", id="other-claim"),
    ],
)  # fmt: skip
async def test_bad_requests_are_refused_naming_why(
    api: FakeApi, body: bytes, error: type[Exception], words: str
) -> None:
    """No claim, a stopped VMI, a missing claim, a claim in use, a dump underway, another
    claim associated: refused, nothing written."""
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        await MemoryDumpApi(api).dump(REF, body)
    assert api.patches == []


@pytest.mark.parametrize(
    ("claim", "words"),
    [
        pytest.param(_claim("240Mi"), "pvc size [240Mi] should be bigger then [241Mi]", id="small"),
        pytest.param(_claim(volumeMode="Block"), "pvc should be filesystem pvc", id="block"),
        pytest.param(_claim(accessModes=["ReadOnlyMany"]), "can't be read only", id="ro"),
    ],
)
async def test_unfit_claims_are_refused(claim: dict[str, Any], words: str) -> None:
    """A claim smaller than (memory + 100Mi) x 1.055 (241Mi for 128Mi), a Block claim, a
    read-only one: 409."""
    api = FakeApi()
    api.objects[("persistentvolumeclaims", "dump")] = claim
    with pytest.raises(Conflict, match=words.replace("[", r"\[").replace("]", r"\]")):
        await MemoryDumpApi(api).dump(REF, b'{"claimName": "dump"}')


async def test_remove_marks_the_request_dissociating() -> None:
    """removememorydump: Dissociating + remove, on the associated claim; none: 409."""
    api = FakeApi(request={"claimName": "dump", "phase": "Completed"})
    await MemoryDumpApi(api).remove(REF)
    assert api.patches[0][1]["value"] == {
        "claimName": "dump", "phase": "Dissociating", "remove": True
    }  # fmt: skip
    with pytest.raises(Conflict, match="no association found"):
        await MemoryDumpApi(FakeApi()).remove(REF)
