"""The launcher's cgroup partition name: the one contract between the launcher, which
makes ``machine/<name>.partition`` in every cgroup hierarchy for its domain, and the
handler, which removes what a launcher that died (SIGKILL, OOM) left behind once it
forgets the VMI.

The name carries the VMI uid (so the handler finds a dead launcher's partitions without
having known its pid) and the launcher's pid (so two launchers of one VMI on one host,
source and target of a migration, never share one).
"""

from __future__ import annotations

UID_CHARS = 20
PREFIX = "kvpy-"
SUFFIX = ".partition"


def _uid_part(vmi_uid: str) -> str:
    return vmi_uid.replace("-", "")[:UID_CHARS]


def partition_name(vmi_uid: str, pid: int) -> str:
    """The launcher's partition (libvirt's ``/machine/<name>``)."""
    return f"{PREFIX}{_uid_part(vmi_uid)}-{pid}"


def partition_glob(vmi_uid: str) -> str:
    """Matches the partition directories of every launcher of the VMI, in one hierarchy's
    ``machine`` directory."""
    return f"{PREFIX}{_uid_part(vmi_uid)}-*{SUFFIX}"
