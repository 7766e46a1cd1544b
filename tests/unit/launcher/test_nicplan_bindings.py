"""The launcher's side of network binding plugins: KubeVirt's `passt` plugin is the
launcher's passt (same plan, sysctls and interface as passtBinding), and an interface the
handler wired for a managedTap or tap plugin is an `<interface type='ethernet'>` on that
tap with the MAC the wiring gave (launcher/nicplan.py)."""

from __future__ import annotations

from pathlib import Path

from controller.config import TemplateConfig
from controller.services.template import TemplateService
from launcher.domxml import NetBackend
from launcher.nicplan import interface_plans, passt_interfaces
from shared.model import VirtualMachineInstance
from shared.podnet import Binding, PodWiring, WiredInterface
from tests.unit.controller.builders import make_vmi, vmi_dict
from tests.unit.controller.services.test_template import IMAGE


def _vmi(binding: str) -> VirtualMachineInstance:
    raw = vmi_dict()
    raw["spec"]["domain"]["devices"]["interfaces"] = [
        {"name": "default", "binding": {"name": binding}, "ports": [{"port": 7}]}
        if binding == "passt" else {"name": "default", "binding": {"name": binding}}
    ]  # fmt: skip
    raw["spec"]["networks"] = [{"name": "default", "pod": {}}]
    return VirtualMachineInstance.from_dict(raw)


def test_the_passt_plugin_is_the_launchers_passt(tmp_path: Path) -> None:
    """binding: {name: passt} gets a passt socket and its listed ports, no libvirt
    interface, and the pod's passt sysctls, as passtBinding does."""
    vmi = _vmi("passt")
    (iface,) = passt_interfaces(vmi, socket_dir=tmp_path)
    assert iface.forwards == (("tcp", (7,)),)
    assert interface_plans(vmi, None) == ()
    pod = TemplateService(TemplateConfig(launcher_image=IMAGE)).launcher_pod(
        make_vmi(raw=vmi.to_dict())
    )
    names = {s["name"] for s in pod["spec"]["securityContext"]["sysctls"]}
    assert "net.ipv4.ping_group_range" in names


def test_a_wired_plugin_interface_opens_its_tap() -> None:
    """A managedTap interface the handler wired is an ethernet NIC on its tap with the pod
    interface's MAC; unwired it is still ethernet (never QEMU's user network)."""
    vmi = _vmi("l2")
    wired = WiredInterface(
        name="default", binding=Binding.MANAGED_TAP, tap="tap0", bridge="k6t-eth0",
        guest_ip="", prefix=0, server_ip="", gateway=None, mac="0a:58:0a:f4:00:05",
    )  # fmt: skip
    (plan,) = interface_plans(vmi, PodWiring(interfaces=(wired,)))
    assert (plan.backend, plan.tap, plan.mac) == (NetBackend.ETHERNET, "tap0", wired.mac)
    (unwired,) = interface_plans(vmi, None)
    assert unwired.backend is NetBackend.ETHERNET and unwired.tap is None
