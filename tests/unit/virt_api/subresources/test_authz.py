"""SubjectAccessReviews: the request shape, the decision, and failures that never allow."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from shared.actions import ACTIONS, Action
from shared.kube import Resource, ServerError
from tests.unit.virt_api.subresources.fakes import FakeAuthorizer
from virt_api.subresources.authn import UserInfo
from virt_api.subresources.authz import (
    SUBJECT_ACCESS_REVIEWS,
    ResourceAttributes,
    SarAuthorizer,
    require,
    sar_body,
)
from virt_api.subresources.errors import Denied, SubresourceError, VmiRef

USER = UserInfo(
    name="system:serviceaccount:ns1:sa",
    uid="u-1",
    groups=("system:serviceaccounts", "system:authenticated"),
    extra={"scopes": ("a", "b")},
)
VMI = VmiRef(namespace="ns1", name="vm1")


@dataclass
class FakeCreates:
    answer: dict[str, Any] = field(default_factory=dict)
    error: Exception | None = None
    created: list[tuple[Resource, Mapping[str, Any]]] = field(default_factory=list)

    async def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        self.created.append((resource, body))
        if self.error is not None:
            raise self.error
        return self.answer


@pytest.mark.parametrize(
    ("action", "verb"),
    [
        pytest.param(Action.PAUSE, "update", id="put-is-update"),
        pytest.param(Action.SOFT_REBOOT, "update", id="softreboot"),
        pytest.param(Action.GUEST_OS_INFO, "get", id="get-is-get"),
        pytest.param(Action.CONSOLE, "get", id="console-websocket-is-get"),
    ],
)
def test_review_names_the_subresource_and_verb(action: Action, verb: str) -> None:
    """The review asks for <verb> on subresources.kubevirt.io virtualmachineinstances/<action>."""
    body = sar_body(USER, ResourceAttributes.of(ACTIONS[action], VMI))
    assert body == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "system:serviceaccount:ns1:sa",
            "uid": "u-1",
            "groups": ["system:serviceaccounts", "system:authenticated"],
            "extra": {"scopes": ["a", "b"]},
            "resourceAttributes": {
                "namespace": "ns1",
                "verb": verb,
                "group": "subresources.kubevirt.io",
                "version": "v1",
                "resource": "virtualmachineinstances",
                "subresource": str(action),
                "name": "vm1",
            },
        },
    }


def test_review_without_uid_or_extra_omits_them() -> None:
    """Empty uid and extra are left out of the spec, as kube-apiserver would."""
    spec = sar_body(UserInfo(name="alice"), ResourceAttributes.of(ACTIONS[Action.PAUSE], VMI))
    assert set(spec["spec"]) == {"user", "groups", "resourceAttributes"}


@pytest.mark.parametrize(
    ("status", "allowed"),
    [
        pytest.param({"allowed": True}, True, id="allowed"),
        pytest.param({"allowed": False, "reason": "no RBAC"}, False, id="not-allowed"),
        pytest.param({"allowed": True, "denied": True}, False, id="denied-wins"),
        pytest.param({}, False, id="empty-status"),
    ],
)
async def test_sar_authorizer_reads_the_status(status: dict[str, Any], allowed: bool) -> None:
    """allowed and not denied is an allow; anything else is not."""
    kube = FakeCreates(answer={"status": status})
    decision = await SarAuthorizer(kube).authorize(
        USER, ResourceAttributes.of(ACTIONS[Action.PAUSE], VMI)
    )
    assert decision.allowed is allowed
    assert kube.created[0][0] == SUBJECT_ACCESS_REVIEWS


async def test_failed_review_is_an_error_not_an_allow() -> None:
    """When the API server cannot answer, the call fails with 500 (never proceeds)."""
    kube = FakeCreates(error=ServerError(503, "ServiceUnavailable", "etcd"))
    with pytest.raises(SubresourceError) as info:
        await SarAuthorizer(kube).authorize(USER, ResourceAttributes.of(ACTIONS[Action.PAUSE], VMI))
    assert info.value.code == 500


async def test_require_denies_with_a_kubernetes_style_message() -> None:
    """A denial is a 403 Status naming the user, verb, subresource, group and namespace."""
    authorizer = FakeAuthorizer(allow=False, reason="RBAC: no rule")
    attrs = ResourceAttributes.of(ACTIONS[Action.PAUSE], VMI)
    with pytest.raises(Denied) as info:
        await require(authorizer, USER, attrs)
    status = info.value.to_status()
    assert status["code"] == 403
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        'virtualmachineinstances.subresources.kubevirt.io "vm1" is forbidden: '
        'User "system:serviceaccount:ns1:sa" cannot update resource '
        '"virtualmachineinstances/pause" in API group "subresources.kubevirt.io" '
        'in the namespace "ns1": RBAC: no rule'
    )
    assert status["details"] == {
        "name": "vm1",
        "group": "subresources.kubevirt.io",
        "kind": "virtualmachineinstances",
    }
