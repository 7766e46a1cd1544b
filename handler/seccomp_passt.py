"""The seccomp profile of passt VMIs' launcher pods: KubeVirt's plus passt's own sandbox.

passt (the launcher runs it for a `passtBinding` interface, as the unprivileged qemu user)
sandboxes itself before it touches a packet (its isolation.c): it enters a user namespace
of its own (`isolate_user`), then detaches into new mount, IPC, UTS and PID namespaces,
makes `/` unbindable, mounts an empty read-only tmpfs, `pivot_root`s into it and detaches
the old root (`isolate_prefork`); last it installs its own, much narrower seccomp filter
(`isolate_postfork`, through `prctl`, already allowed). The runtime's default and KubeVirt's
profile refuse `unshare`, `mount`, `pivot_root` and `umount2` (they are namespace and mount
administration), so passt dies with "Couldn't create user namespace" under them
(kubevirt/kubevirt#12333). This profile is KubeVirt's (handler/seccomp.py) with exactly
those calls added, each only with the arguments passt passes where the argument is a
value (the paths are pointers, which seccomp cannot see):

    unshare(CLONE_NEWUSER)                                   its user namespace
    unshare(CLONE_NEWNS|CLONE_NEWUTS|CLONE_NEWIPC|CLONE_NEWPID)   its other namespaces
    mount(…, MS_REC|MS_UNBINDABLE, …)                        "/" unbindable, in its mount ns
    mount(…, MS_RDONLY|MS_NOSUID|MS_NODEV|MS_NOEXEC, …)      the empty tmpfs it pivots into
    pivot_root(".", ".")                                     into that tmpfs
    umount2(…, MNT_DETACH|UMOUNT_NOFOLLOW)                   the old root, detached

No `clone` with namespace flags, no `setns`, no other mount flags (no remount, bind or
move). The kernel still checks capabilities: the compute container has none, so mount,
pivot_root and umount2 succeed only in the mount namespace passt's own user namespace owns.
handler/seccomp.py composes and writes the profile next to KubeVirt's on every node,
whatever the KubeVirt CR says (passt VMIs always name it: shared/seccompconfig.py).
"""

from __future__ import annotations

from typing import Any

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID = 0x10000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REC, MS_UNBINDABLE = 0x4000, 0x20000
MNT_DETACH, UMOUNT_NOFOLLOW = 0x2, 0x8

# (syscall, index of the flags argument, the one value passt passes; None: no condition).
_ADDITIONS: tuple[tuple[str, int | None, int], ...] = (
    ("unshare", 0, CLONE_NEWUSER),
    ("unshare", 0, CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID),
    ("mount", 3, MS_REC | MS_UNBINDABLE),
    ("mount", 3, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC),
    ("pivot_root", None, 0),
    ("umount2", 1, MNT_DETACH | UMOUNT_NOFOLLOW),
)


def additions() -> list[dict[str, Any]]:
    """passt's sandbox calls, one rule per allowed argument value (runc ORs rules)."""
    rules = []
    for name, index, value in _ADDITIONS:
        args = [] if index is None else [
            {"index": index, "value": value, "valueTwo": 0, "op": "SCMP_CMP_EQ"}
        ]  # fmt: skip
        rules.append({"names": [name], "action": "SCMP_ACT_ALLOW", "args": args})
    return rules
