"""The exporter pod reads disks a launcher made (its user's, mode 0660) through the
launcher's group, found by the real-node long-names test: a VM's export answered 500."""

from __future__ import annotations

from controller.export.bodies import Claim, exporter_pod
from shared.launcherpod import LAUNCHER_GID
from shared.model.export import VirtualMachineExport


def test_the_exporter_joins_the_launchers_group() -> None:
    """supplementalGroups carries the launcher's gid; still root without capabilities."""
    vme = VirtualMachineExport.from_dict({"metadata": {"name": "e", "namespace": "ns", "uid": "u"}})
    pod = exporter_pod(
        vme, [Claim(name="disk")], token_secret_name="t", image="i", pull_policy="Never"
    )
    assert pod["spec"]["securityContext"]["supplementalGroups"] == [LAUNCHER_GID]
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
