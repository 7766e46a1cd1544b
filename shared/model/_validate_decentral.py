"""A VMIM's decentralized-migration halves (KubeVirt 1.7: `spec.sendTo` on the sending
side, `spec.receive` on the receiving side, paired by `migrationID`): bad values refused at
admission naming the field, with KubeVirt's messages where KubeVirt has one.

kubevirt-py does not pair the halves yet, so a well-formed one is still refused as not
supported (shared/model/unsupported.py); these checks make the refusal name what is
wrong first."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from shared.labels import RESTORE_RUN_STRATEGY_ANNOTATION
from shared.model._validate_common import DNS1123_SUBDOMAIN, Errors
from shared.model.enums import RunStrategy
from shared.model.meta import ObjectMeta

if TYPE_CHECKING:  # annotations only: a VMI's validation (the launcher's) loads no VMIM model
    from shared.model.migration import MigrationSpec

MAX_PORT = 65535
# KubeVirt's ValidatingAdmissionPolicy message for a VMIM that is both halves.
ID_MISMATCH = "spec.sendTo.migrationID must match spec.receive.migrationID when both are set"
_URL_RULE = (
    "must be host:port, the receiving side's synchronization address "
    "(its VMIM's status.synchronizationAddresses), e.g. 10.0.0.5:9185 or [fd00::5]:9185"
)


def _host_problem(host: str) -> str | None:
    """Why `host` is neither a bracketed IPv6 address nor an IPv4 address or DNS name."""
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return f"{host} is not an IPv6 address"
        return None
    if not DNS1123_SUBDOMAIN.fullmatch(host.lower()):
        return f"{host!r} is neither an address nor a DNS name"
    return None


def _host_port_problem(url: str) -> str | None:
    """Why `url` is not `host:port`."""
    if "://" in url or "/" in url:
        return f"{_URL_RULE}; no scheme or path"
    host, colon, port = url.rpartition(":")
    if not colon or not host:
        return _URL_RULE
    if not port.isdigit() or not 1 <= int(port) <= MAX_PORT:
        return f"{_URL_RULE}; the port must be 1-{MAX_PORT}"
    problem = _host_problem(host)
    return None if problem is None else f"{_URL_RULE}; {problem}"


def check_decentralized(errs: Errors, spec: MigrationSpec) -> None:
    """sendTo has a migrationID and a host:port connectURL; receive has a migrationID;
    when both are set their migrationIDs are the same."""
    send, receive = spec.send_to, spec.receive
    if send is not None:
        if not send.migration_id:
            errs.add("spec.sendTo.migrationID", "is required", send.migration_id)
        if not send.connect_url:
            errs.add("spec.sendTo.connectURL", "is required", send.connect_url)
        elif (problem := _host_port_problem(send.connect_url)) is not None:
            errs.add("spec.sendTo.connectURL", problem, send.connect_url)
    if receive is not None and not receive.migration_id:
        errs.add("spec.receive.migrationID", "is required", receive.migration_id)
    if (
        send is not None
        and receive is not None
        and send.migration_id
        and receive.migration_id
        and send.migration_id != receive.migration_id
    ):
        errs.add("spec.sendTo.migrationID", ID_MISMATCH, send.migration_id)


def check_restore_run_strategy(errs: Errors, meta: ObjectMeta) -> None:
    """A VM's `kubevirt.io/restore-run-strategy` (what a receiving VM runs as once its
    guest arrived) names a run strategy other than WaitAsReceiver."""
    value = meta.annotations.get(RESTORE_RUN_STRATEGY_ANNOTATION)
    allowed = [str(s) for s in RunStrategy if s is not RunStrategy.WAIT_AS_RECEIVER]
    if value is not None and value not in allowed:
        path = f"metadata.annotations.{RESTORE_RUN_STRATEGY_ANNOTATION}"
        errs.add(path, f"must be one of {', '.join(allowed)}", value)
