"""How a handler's failure answer becomes the controller's Status."""

from __future__ import annotations

import json

import pytest

from shared.actions import ACTIONS, Action
from virt_api.subresources.errors import BadGateway, GatewayTimeout, VmiRef
from virt_api.subresources.forward import handler_failure, handler_url
from virt_api.subresources.locate import Target

TARGET = Target(
    vmi=VmiRef(namespace="ns 1", name="vm/1"), node="node01", endpoint="https://10.0.0.5:8186"
)


def test_handler_url_quotes_names() -> None:
    """Names are path-quoted into the handler's URL."""
    assert handler_url(TARGET, ACTIONS[Action.SOFT_REBOOT]) == (
        "https://10.0.0.5:8186/v1/namespaces/ns%201/virtualmachineinstances/vm%2F1/softreboot"
    )


@pytest.mark.parametrize(
    ("status", "body", "error", "cause"),
    [
        pytest.param(
            502,
            json.dumps({"code": "agent_not_connected", "message": "no agent", "details": {}}),
            BadGateway,
            ("agent_not_connected", "no agent", ""),
            id="launcher-error",
        ),
        pytest.param(
            502,
            json.dumps({"code": "invalid_argument", "message": "x", "details": {"field": "vmi"}}),
            BadGateway,
            ("invalid_argument", "x", "vmi"),
            id="field",
        ),
        pytest.param(
            504,
            json.dumps({"code": "launcher_timeout", "message": "20s"}),
            GatewayTimeout,
            ("launcher_timeout", "20s", ""),
            id="timeout",
        ),
        pytest.param(500, "oops", BadGateway, ("http_500", "oops", ""), id="not-json"),
    ],
)
def test_failure_keeps_the_code(
    status: int, body: str, error: type[Exception], cause: tuple[str, str, str]
) -> None:
    """The handler's code, message and field land in the Status causes; 504 stays a timeout."""
    failure = handler_failure(TARGET, ACTIONS[Action.PAUSE], status=status, body=body.encode())
    assert isinstance(failure, error)
    (got,) = failure.causes
    assert (got.reason, got.message, got.field) == cause
    status_body = failure.to_status()
    assert status_body["code"] == (504 if error is GatewayTimeout else 502)
    assert "node01" in status_body["message"]
