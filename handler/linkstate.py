"""Interface links of a running VMI (KubeVirt 1.5+'s live `state`).

The VM controller copies a template interface's changed `state` onto the running VMI
(controller/vm/linkstate.py); here the handler asks the launcher to set each interface's
link as the VMI's spec says (launcher/linkstate.py compares with the live domain and
changes only what differs, so asking again is cheap). Only VMIs that name a state are
asked; nothing is done while the VMI migrates (the target's handler asks once it runs).
"""

from __future__ import annotations

import structlog

from handler.commands import sync_error
from handler.launchers import LauncherPort
from shared.model import VirtualMachineInstance, VMIPhase
from shared.model.devopts import LinkState
from shared.wire.errors import CommandFailed, ErrorCode, RemoteError, WireError
from shared.wire.launcher_api import Method
from shared.wire.links import LinkStatesArgs

log = structlog.get_logger("handler.linkstate")


def wanted(vmi: VirtualMachineInstance) -> LinkStatesArgs | None:
    """The links a Running, not migrating VMI asks for; None when it names no state."""
    interfaces = vmi.spec.domain.devices.interfaces
    if vmi.status.phase is not VMIPhase.RUNNING or all(i.state is None for i in interfaces):
        return None
    migration = vmi.status.migration_state
    if migration is not None and not migration.completed and not migration.failed:
        return None
    return LinkStatesArgs(
        links={i.name or "": i.state != LinkState.DOWN for i in interfaces if i.name}
    )


async def apply(launcher: LauncherPort, args: LinkStatesArgs) -> list[str]:
    """Ask the launcher; the interfaces it changed. A launcher without the command (an
    older image) is logged, not retried."""
    try:
        changed = await launcher.call(Method.SET_LINK_STATES, args.to_wire())
    except (CommandFailed, RemoteError) as exc:
        if exc.code is ErrorCode.UNKNOWN_METHOD:
            log.warning("link_states_unsupported", error=exc.message)
            return []
        raise sync_error(Method.SET_LINK_STATES, exc) from exc
    except WireError as exc:
        raise sync_error(Method.SET_LINK_STATES, exc) from exc
    names = [str(n) for n in changed] if isinstance(changed, list) else []
    if names:
        log.info("link_states_set", interfaces=names)
    return names
