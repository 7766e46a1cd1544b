"""KubeVirt's own seccomp profile for launcher pods, written into the kubelet's seccomp dir.

KubeVirt's virt-handler installs `kubevirt/kubevirt.json` under `<kubelet root>/seccomp`
and launcher pods name it (`seccompProfile: {type: Localhost, …}`) when the KubeVirt CR
asks (shared/seccompconfig.py). Its shape is the container runtime's default allow-list
plus `userfaultfd`, which post-copy migration needs (the runtime's default refuses it).

The allow-list here is the runtime default's for a container without capabilities (the
compute container drops them all, docs/nonroot.md): the file, memory, signal, time,
socket and process calls a program needs; no namespace creation (`clone` only without
namespace flags, `clone3` answered ENOSYS so libc falls back to `clone`), no mount, no
bpf/perf/keyring/module/reboot/clock-setting calls, `personality` only for the usual
personas, `socket` in every address family but AF_ALG and AF_VSOCK. Anything else fails
with EPERM. containerd reads the file as an OCI `LinuxSeccomp`.

Next to it, on every node whatever the CR says, `kubevirt/passt.json`: this profile plus
the few calls passt's own sandbox makes (handler/seccomp_passt.py), which launcher pods of
passt VMIs always name. Each file is written atomically (a temporary file renamed over it),
mode 0600 in a 0700 directory as KubeVirt's, and only when its bytes differ.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from handler.seccomp_passt import additions
from shared.clusterconfig import ClusterConfig
from shared.seccompconfig import KUBEVIRT_PROFILE, PASST_PROFILE, SECCOMP_GATE

log = structlog.get_logger("handler.seccomp")

# The runtime default's unconditional allow-list (x86-64, x86 and x32 names).
_ALLOWED = """
accept accept4 access adjtimex alarm bind brk cachestat capget capset chdir chmod chown
chown32 clock_adjtime clock_adjtime64 clock_getres clock_getres_time64 clock_gettime
clock_gettime64 clock_nanosleep clock_nanosleep_time64 close close_range connect
copy_file_range creat dup dup2 dup3 epoll_create epoll_create1 epoll_ctl epoll_ctl_old
epoll_pwait epoll_pwait2 epoll_wait epoll_wait_old eventfd eventfd2 execve execveat exit
exit_group faccessat faccessat2 fadvise64 fadvise64_64 fallocate fanotify_mark fchdir fchmod
fchmodat fchmodat2 fchown fchown32 fchownat fcntl fcntl64 fdatasync fgetxattr flistxattr
flock fork fremovexattr fsetxattr fstat fstat64 fstatat64 fstatfs fstatfs64 fsync ftruncate
ftruncate64 futex futex_requeue futex_time64 futex_wait futex_waitv futex_wake futimesat
getcpu getcwd getdents getdents64 getegid getegid32 geteuid geteuid32 getgid getgid32
getgroups getgroups32 getitimer getpeername getpgid getpgrp getpid getppid getpriority
getrandom getresgid getresgid32 getresuid getresuid32 getrlimit get_robust_list getrusage
getsid getsockname getsockopt get_thread_area gettid gettimeofday getuid getuid32 getxattr
getxattrat inotify_add_watch inotify_init inotify_init1 inotify_rm_watch io_cancel ioctl
io_destroy io_getevents io_pgetevents io_pgetevents_time64 ioprio_get ioprio_set io_setup
io_submit ipc kill landlock_add_rule
landlock_create_ruleset landlock_restrict_self lchown lchown32 lgetxattr link linkat listen
listmount listxattr listxattrat llistxattr _llseek lremovexattr lseek lsetxattr
lsm_get_self_attr lsm_list_modules lsm_set_self_attr lstat lstat64 madvise map_shadow_stack
membarrier memfd_create memfd_secret mincore mkdir mkdirat mknod mknodat mlock mlock2
mlockall mmap mmap2 mprotect mq_getsetattr mq_notify mq_open mq_timedreceive
mq_timedreceive_time64 mq_timedsend mq_timedsend_time64 mq_unlink mremap mseal msgctl msgget
msgrcv msgsnd msync munlock munlockall munmap name_to_handle_at nanosleep newfstatat
_newselect open openat openat2 pause pidfd_open pidfd_send_signal pipe pipe2 pkey_alloc
pkey_free pkey_mprotect poll ppoll ppoll_time64 prctl pread64 preadv preadv2 prlimit64
process_mrelease pselect6 pselect6_time64 pwrite64 pwritev pwritev2 read readahead readlink
readlinkat readv recv recvfrom recvmmsg recvmmsg_time64 recvmsg remap_file_pages removexattr
removexattrat rename renameat renameat2 restart_syscall rmdir rseq rt_sigaction
rt_sigpending rt_sigprocmask rt_sigqueueinfo rt_sigreturn rt_sigsuspend rt_sigtimedwait
rt_sigtimedwait_time64 rt_tgsigqueueinfo sched_getaffinity sched_getattr sched_getparam
sched_get_priority_max sched_get_priority_min sched_getscheduler sched_rr_get_interval
sched_rr_get_interval_time64 sched_setaffinity sched_setattr sched_setparam
sched_setscheduler sched_yield seccomp select semctl semget semop semtimedop
semtimedop_time64 send sendfile sendfile64 sendmmsg sendmsg sendto setfsgid setfsgid32
setfsuid setfsuid32 setgid setgid32 setgroups setgroups32 setitimer setpgid setpriority
setregid setregid32 setresgid setresgid32 setresuid setresuid32 setreuid setreuid32
setrlimit set_robust_list setsid setsockopt set_thread_area set_tid_address setuid setuid32
setxattr setxattrat shmat shmctl shmdt shmget shutdown sigaltstack signalfd signalfd4
sigprocmask sigreturn socketcall socketpair splice stat stat64 statfs statfs64 statmount
statx symlink symlinkat sync sync_file_range syncfs sysinfo tee tgkill time timer_create
timer_delete timer_getoverrun timer_gettime timer_gettime64 timer_settime timer_settime64
timerfd_create timerfd_gettime timerfd_gettime64 timerfd_settime timerfd_settime64 times
tkill truncate truncate64 ugetrlimit umask uname unlink unlinkat uretprobe utime utimensat
utimensat_time64 utimes vfork vmsplice wait4 waitid waitpid write writev
arch_prctl modify_ldt process_vm_readv process_vm_writev ptrace
"""
# KubeVirt's addition: post-copy migration's page-fault handling.
_KUBEVIRT_EXTRA = ("userfaultfd",)
# personality(2) personas: Linux, its 32-bit variant, UNAME26, both, and the query.
_PERSONAS = (0x0, 0x0008, 0x20000, 0x20008, 0xFFFFFFFF)
_AF_ALG, _AF_VSOCK, _AF_MAX = 38, 40, 46
_NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
_ENOSYS = 38


def _allow(names: list[str] | tuple[str, ...], *args: dict[str, int | str]) -> dict[str, Any]:
    return {"names": sorted(names), "action": "SCMP_ACT_ALLOW", "args": list(args)}


def _arg(index: int, value: int, op: str, value_two: int = 0) -> dict[str, int | str]:
    return {"index": index, "value": value, "valueTwo": value_two, "op": op}


def _socket_rules() -> list[dict[str, Any]]:
    """One rule per comparison: runc ORs repeated comparisons of one argument."""
    rules = [_allow(["socket"], _arg(0, _AF_ALG, "SCMP_CMP_LT"))]
    for family in range(_AF_ALG + 1, _AF_MAX):
        if family != _AF_VSOCK:
            rules.append(_allow(["socket"], _arg(0, family, "SCMP_CMP_EQ")))
    return rules


def profile() -> dict[str, Any]:
    """The profile, as containerd reads it (OCI runtime-spec LinuxSeccomp)."""
    names = sorted({*_ALLOWED.split(), *_KUBEVIRT_EXTRA})
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
        "syscalls": [
            _allow(names),
            *(_allow(["personality"], _arg(0, p, "SCMP_CMP_EQ")) for p in _PERSONAS),
            *_socket_rules(),
            _allow(["clone"], _arg(0, _NAMESPACE_FLAGS, "SCMP_CMP_MASKED_EQ", 0)),
            {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": _ENOSYS},
        ],
    }


def passt_profile() -> dict[str, Any]:
    """KubeVirt's profile with passt's sandbox calls appended, nothing else."""
    base = profile()
    return {**base, "syscalls": [*base["syscalls"], *additions()]}


def render(p: dict[str, Any]) -> bytes:
    """A profile's file content (stable: the same bytes on every node and start)."""
    return (json.dumps(p, indent=1, sort_keys=True) + "\n").encode()


def install(seccomp_dir: Path, *, name: str = KUBEVIRT_PROFILE) -> bool:
    """Write a profile as `<seccomp_dir>/<name>` (KubeVirt's, or passt's: PASST_PROFILE);
    False if it was already there with the same bytes (its mode is still set to 0600)."""
    target = seccomp_dir / name
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    body = render({KUBEVIRT_PROFILE: profile, PASST_PROFILE: passt_profile}[name]())
    try:
        same = target.read_bytes() == body
    except FileNotFoundError:
        same = False
    if same:
        target.chmod(0o600)
        return False
    tmp = target.with_name(f".{target.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, body)
        os.fsync(fd)
    finally:
        os.close(fd)
    tmp.replace(target)
    return True


def _install_logged(seccomp_dir: Path, name: str) -> None:
    try:
        written = install(seccomp_dir, name=name)
    except OSError as e:
        log.error("seccomp_profile_install_failed", path=str(seccomp_dir / name), error=str(e))
        return
    log.info("seccomp_profile_installed", path=str(seccomp_dir / name), written=written)


def install_always(seccomp_dir: Path | None) -> None:
    """passt's profile, whatever the cluster wants (passt VMIs always name it): the
    handler writes it as it starts, before it is Ready; None dir: no kubelet seccomp dir
    mounted."""
    if seccomp_dir is not None:
        _install_logged(seccomp_dir, PASST_PROFILE)


def installer(seccomp_dir: Path | None) -> Callable[[ClusterConfig], None]:
    """A live-config listener that installs KubeVirt's profile when the cluster wants it
    (see shared/seccompconfig.py); None dir: never (no kubelet seccomp dir mounted)."""

    def apply(config: ClusterConfig) -> None:
        wanted = config.gate(SECCOMP_GATE) or config.seccomp_localhost_profile == KUBEVIRT_PROFILE
        if seccomp_dir is not None and wanted:
            _install_logged(seccomp_dir, KUBEVIRT_PROFILE)

    return apply
