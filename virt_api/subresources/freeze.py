"""The body of KubeVirt's VMI freeze: `{"unfreezeTimeout": "<Go duration>"}` (virtctl sends
"5m0s" by default), checked here, the earliest layer, and forwarded to the handler as
`{"unfreezeTimeoutSeconds": N}`: the launcher thaws the guest's filesystems by itself once
that time has passed (0: never). Other actions take no body and forward none.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from shared.actions import Action, ActionSpec
from shared.duration import go_duration
from virt_api.subresources.errors import BadRequest, VmiRef

MAX_BODY = 64 * 1024


async def action_args(request: web.Request, spec: ActionSpec, vmi: VmiRef) -> dict[str, Any]:
    """What to forward with `spec`: freeze's timeout in seconds; nothing for the others."""
    if spec.action is not Action.FREEZE:
        return {}
    body = await request.content.read(MAX_BODY + 1)
    if len(body) > MAX_BODY:
        raise BadRequest(f"the request body is larger than {MAX_BODY} bytes", vmi=vmi)
    try:
        raw = json.loads(body) if body.strip() else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadRequest(f"the request body is not JSON: {e}", vmi=vmi) from e
    timeout = raw.get("unfreezeTimeout") if isinstance(raw, dict) else None
    if not isinstance(timeout, str):
        raise BadRequest('unfreezeTimeout: a duration such as "5m0s" is required', vmi=vmi)
    try:
        seconds = go_duration(timeout)
    except ValueError as e:
        raise BadRequest(f"unfreezeTimeout: {e}", vmi=vmi) from e
    return {"unfreezeTimeoutSeconds": seconds}
