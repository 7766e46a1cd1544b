"""The body of KubeVirt's VMI freeze: `{"unfreezeTimeout": "<Go duration>"}` (virtctl sends
"5m0s" by default), checked here, the earliest layer, and forwarded to the handler as
`{"unfreezeTimeoutSeconds": N}`: the launcher thaws the guest's filesystems by itself once
that time has passed (0: never). The backup controller's body (shared/wire/backup.py) is
checked the same way and forwarded as it is. Other actions take no body and forward none.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from shared.actions import Action, ActionSpec
from shared.duration import go_duration
from shared.wire.backup import BackupRequest
from shared.wire.errors import InvalidArgument
from virt_api.subresources.errors import BadRequest, VmiRef

MAX_BODY = 64 * 1024


async def action_args(request: web.Request, spec: ActionSpec, vmi: VmiRef) -> dict[str, Any]:
    """What to forward with `spec`: freeze's timeout in seconds, a backup's request;
    nothing for the others."""
    if spec.action is Action.BACKUP:
        return _backup_request(await _json(request, vmi), vmi)
    if spec.action is not Action.FREEZE:
        return {}
    raw = await _json(request, vmi)
    timeout = raw.get("unfreezeTimeout") if isinstance(raw, dict) else None
    if not isinstance(timeout, str):
        raise BadRequest('unfreezeTimeout: a duration such as "5m0s" is required', vmi=vmi)
    try:
        seconds = go_duration(timeout)
    except ValueError as e:
        raise BadRequest(f"unfreezeTimeout: {e}", vmi=vmi) from e
    return {"unfreezeTimeoutSeconds": seconds}


def _backup_request(raw: Any, vmi: VmiRef) -> dict[str, Any]:
    """A backup's body, checked here (shared/wire/backup.py's BackupRequest)."""
    try:
        return BackupRequest.from_wire(raw if isinstance(raw, dict) else {}).to_wire()
    except InvalidArgument as e:
        raise BadRequest(f"backup: {e}", vmi=vmi) from e


async def _json(request: web.Request, vmi: VmiRef) -> Any:
    body = await request.content.read(MAX_BODY + 1)
    if len(body) > MAX_BODY:
        raise BadRequest(f"the request body is larger than {MAX_BODY} bytes", vmi=vmi)
    try:
        raw = json.loads(body) if body.strip() else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadRequest(f"the request body is not JSON: {e}", vmi=vmi) from e
    return raw
