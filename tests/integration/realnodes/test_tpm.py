"""devices.tpm on real nodes: the tiny guest with `tpm: {}` (examples/conformance/vmi-tpm.yaml)
runs; its live domain has the emulated TPM 2.0, libvirt runs swtpm for it as the launcher's
non-root user, and the guest's kernel (tpm_tis built in; `tpm_tis.force=1` in the
example's kernelArgs: the directly booted tiny guest has no usable ACPI tables) sees a
TPM 2.0."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_shared_storage import (
    _agent_connected,
    _guest_sh,
    _libvirt,
)
from tests.integration.realnodes.test_storage import _apply, _running
from tests.integration.realnodes.test_story import REPO

pytestmark = pytest.mark.cluster
LAUNCHER_UID = 107  # shared.launcherpod.LAUNCHER_UID: the default, non-root launcher


def _swtpm(domain: str) -> tuple[int, str]:
    """The uid and command line of the swtpm process libvirt started for `domain`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            status = (entry / "status").read_text()
        except OSError:
            continue
        cmdline = b" ".join(argv).decode(errors="replace")
        if argv[0].endswith(b"swtpm") and f"/{domain}-swtpm.log" in cmdline:
            uid = next(int(line.split()[1]) for line in status.splitlines() if line[:4] == "Uid:")
            return uid, cmdline
    raise AssertionError(f"no swtpm process for {domain}")


def _live_tpms(cluster: Cluster, vmi: dict[str, Any], domain: str) -> list[ET.Element]:
    with _libvirt(cluster, vmi) as uri:
        done = subprocess.run(
            ["virsh", "-c", uri, "dumpxml", domain], capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 0, done.stderr
    return ET.fromstring(done.stdout).findall("devices/tpm")


def test_guest_sees_its_emulated_tpm(
    real_cluster: Cluster, real_stack: Kubectl, real_namespace: str
) -> None:
    """A VMI with `tpm: {}` is Running; the live domain XML has one tpm-tis device with an
    emulator TPM 2.0 backend; a swtpm process runs for it as uid 107 (non-root launcher,
    its state in the launcher's private dirs); the guest has /dev/tpm0 and /dev/tpmrm0 (the
    resource manager only a TPM 2.0 gets)."""
    k, ns = real_stack, real_namespace
    vmi: dict[str, Any] = yaml.safe_load(
        (REPO / "examples" / "conformance" / "vmi-tpm.yaml").read_text()
    )
    name = vmi["metadata"]["name"]
    vmi["spec"]["terminationGracePeriodSeconds"] = 0
    try:
        _apply(k, ns, vmi)
        running = _running(k, ns, name)
        domain = f"{ns}_{name}"
        (tpm,) = _live_tpms(real_cluster, running, domain)
        assert tpm.get("model") == "tpm-tis"
        backend = tpm.find("backend")
        assert backend is not None
        assert (backend.get("type"), backend.get("version")) == ("emulator", "2.0")
        uid, cmdline = _swtpm(domain)
        assert uid == LAUNCHER_UID, cmdline
        assert "--tpm2" in cmdline and "/var/lib/libvirt/" not in cmdline, cmdline
        _agent_connected(k, ns, name)
        seen = _guest_sh(
            real_cluster,
            running,
            "for d in tpm0 tpmrm0; do [ -c /dev/$d ] && echo $d; done; true",
        )
        assert seen.split() == ["tpm0", "tpmrm0"], seen
    finally:
        k("delete", "vmi", "--all", "-n", ns, "--wait=true", "--timeout=120s", check=False)
