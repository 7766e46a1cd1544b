"""passt VMIs' launcher seccomp profile: KubeVirt's plus exactly the calls passt's own
sandbox makes, each bound to passt's arguments; virt-handler writes it on every node."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from handler.seccomp import install, install_always, installer, passt_profile, profile
from shared.clusterconfig import ClusterConfig
from shared.seccompconfig import KUBEVIRT_PROFILE, PASST_PROFILE


def _eq(index: int, value: int) -> list[dict[str, int | str]]:
    return [{"index": index, "value": value, "valueTwo": 0, "op": "SCMP_CMP_EQ"}]


def test_the_passt_profile_is_kubevirts_plus_the_sandbox_calls() -> None:
    """Everything of KubeVirt's profile unchanged (default EPERM, arches, every rule in
    order), then six rules and nothing else: unshare(CLONE_NEWUSER), unshare(NEWNS|NEWUTS|
    NEWIPC|NEWPID), mount with MS_REC|MS_UNBINDABLE or with RDONLY|NOSUID|NODEV|NOEXEC,
    pivot_root, umount2(MNT_DETACH|UMOUNT_NOFOLLOW). No clone with namespace flags, no
    setns."""
    base, passt = profile(), passt_profile()
    assert {k: v for k, v in passt.items() if k != "syscalls"} == {
        k: v for k, v in base.items() if k != "syscalls"
    }
    n = len(base["syscalls"])
    assert passt["syscalls"][:n] == base["syscalls"]
    added = [(r["names"], r["action"], r["args"]) for r in passt["syscalls"][n:]]
    allow = "SCMP_ACT_ALLOW"
    assert added == [
        (["unshare"], allow, _eq(0, 0x10000000)),
        (["unshare"], allow, _eq(0, 0x2C020000)),
        (["mount"], allow, _eq(3, 0x24000)),
        (["mount"], allow, _eq(3, 0xF)),
        (["pivot_root"], allow, []),
        (["umount2"], allow, _eq(1, 0xA)),
    ]
    names = {n for r in passt["syscalls"] for n in r["names"]}
    assert "setns" not in names and "clone3" in names  # clone3 stays ENOSYS
    (clone,) = [r for r in passt["syscalls"] if r["names"] == ["clone"]]
    assert clone["args"][0]["op"] == "SCMP_CMP_MASKED_EQ"  # still no namespace flags


def test_the_handler_writes_passts_profile_always(tmp_path: Path) -> None:
    """As the handler starts (install_always) `kubevirt/passt.json` is written whatever the
    cluster says, 0600 in the 0700 dir beside KubeVirt's; KubeVirt's only when the CR
    asks; a second write with the same bytes leaves it alone; no dir: nothing, no error."""
    install_always(tmp_path)
    apply = installer(tmp_path)
    target = tmp_path / PASST_PROFILE
    assert json.loads(target.read_text()) == passt_profile()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    apply(ClusterConfig())
    assert not (tmp_path / KUBEVIRT_PROFILE).exists()
    apply(ClusterConfig(seccomp_localhost_profile=KUBEVIRT_PROFILE))
    assert json.loads((tmp_path / KUBEVIRT_PROFILE).read_text()) == profile()
    assert install(tmp_path, name=PASST_PROFILE) is False
    target.write_text("{}")
    assert install(tmp_path, name=PASST_PROFILE) is True
    assert sorted(p.name for p in target.parent.iterdir()) == ["kubevirt.json", "passt.json"]
    installer(None)(ClusterConfig())
    install_always(None)
