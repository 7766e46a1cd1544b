"""Disk and interface options on real nodes: one q35 VM (machine type defaulted by
admission) with every disk option kubevirt-py honours on its disks (cache, io, errorPolicy,
blockSize custom and matchVolume, readonly, shareable (on a claim: libvirt shares raw
images only), serial, bootOrder, a dedicated I/O
thread under ioThreadsPolicy shared, blockMultiQueue) and two interfaces (an e1000e on the
pod network with pciAddress, acpiIndex, bootOrder and dhcpOptions; a virtio NIC on a
multus network with networkInterfaceMultiqueue, its link down) runs; its live domain XML
carries each option, the guest reads its cloud-init CD-ROM on q35's AHCI, sees the
dhcpOptions in its lease, and sees the virtio NIC's carrier come and go as the VM's
interface state is edited (live: same VMI, no RestartRequired)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_multus import _apply, _bridge_nad, _secondary_vmi
from tests.integration.realnodes.test_network import _guest_says, _running_vmi
from tests.integration.realnodes.test_shared_storage import _agent_connected, _domain_xml, _guest_sh
from tests.integration.realnodes.test_story import _wait

pytestmark = pytest.mark.cluster
NAME = "opts"
DHCP_OPTIONS = {
    "bootFileName": "pxelinux.0",
    "tftpServerName": "tftp.kvpy.test",
    "ntpServers": ["198.51.100.7", "198.51.100.8"],
    "privateOptions": [{"option": 240, "value": "kvpy-private"}],
}


def _vmi(nad: str) -> dict[str, Any]:
    vmi = _secondary_vmi(NAME, nad, node="node01")
    spec = vmi["spec"]
    domain = spec["domain"]
    domain["cpu"] = {"sockets": 2}
    domain["ioThreadsPolicy"] = "shared"
    devices = domain["devices"]
    devices["blockMultiQueue"] = True
    devices["networkInterfaceMultiqueue"] = True
    devices["disks"] = [
        {"name": "containerdisk", "disk": {"bus": "virtio"}, "bootOrder": 1,
         "cache": "writeback", "io": "threads", "errorPolicy": "enospace",
         "blockSize": {"matchVolume": {"enabled": True}}},
        {"name": "fast", "disk": {"bus": "virtio"}, "cache": "none", "io": "native",
         "errorPolicy": "report", "dedicatedIOThread": True, "serial": "FAST0001",
         "blockSize": {"custom": {"logical": 512, "physical": 4096}}},
        {"name": "ro", "disk": {"bus": "virtio", "readonly": True}, "cache": "writethrough",
         "io": "default", "errorPolicy": "ignore"},
        {"name": "shared", "disk": {"bus": "virtio"}, "shareable": True, "errorPolicy": "stop"},
        {"name": "cloudinit", "cdrom": {"bus": "sata"}},
    ]  # fmt: skip
    spec["volumes"] += [
        {"name": "fast", "emptyDisk": {"capacity": "16Mi"}},
        {"name": "ro", "emptyDisk": {"capacity": "16Mi"}},
        {"name": "shared", "persistentVolumeClaim": {"claimName": "opts-shared"}},
        {"name": "cloudinit", "cloudInitNoCloud": {"userData": "#cloud-config\nopts: yes\n"}},
    ]
    default, sec = devices["interfaces"]
    default.update(model="e1000e", pciAddress="0000:00:0a.0", acpiIndex=3, bootOrder=3,
                   dhcpOptions=DHCP_OPTIONS)  # fmt: skip
    sec.update(model="virtio", state="down")
    return vmi


def _vm(nad: str) -> dict[str, Any]:
    spec = _vmi(nad)["spec"]
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": NAME},
            "spec": {"runStrategy": "Always", "template": {"metadata": {}, "spec": spec}}}  # fmt: skip


def _by_alias(root: ET.Element, tag: str) -> dict[str, ET.Element]:
    out = {}
    for el in root.iterfind(f"devices/{tag}"):
        alias = el.find("alias")
        if alias is not None:
            out[(alias.get("name") or "").removeprefix("ua-")] = el
    return out


def _attrs(el: ET.Element | None) -> dict[str, str]:
    assert el is not None
    return dict(el.attrib)


def _check_disks(root: ET.Element) -> None:
    disks = _by_alias(root, "disk")
    assert root.findtext("iothreads") == "2"
    boot = disks["containerdisk"]
    driver = _attrs(boot.find("driver"))
    assert (driver["cache"], driver["io"], driver["error_policy"]) == ("writeback", "threads",
                                                                      "enospace")  # fmt: skip
    assert driver["queues"] == "2" and driver["iothread"] == "1"
    assert _attrs(boot.find("boot"))["order"] == "1"
    assert boot.find("blockio") is not None
    fast = disks["fast"]
    driver = _attrs(fast.find("driver"))
    assert (driver["cache"], driver["io"], driver["error_policy"]) == ("none", "native", "report")
    assert driver["iothread"] == "2"  # its own thread
    assert fast.findtext("serial") == "FAST0001"
    blockio = _attrs(fast.find("blockio"))
    assert (blockio["logical_block_size"], blockio["physical_block_size"]) == ("512", "4096")
    ro = disks["ro"]
    driver = _attrs(ro.find("driver"))
    assert (driver["cache"], driver.get("io"), driver["error_policy"]) == (
        "writethrough", None, "ignore")  # fmt: skip
    assert ro.find("readonly") is not None
    shared = disks["shared"]
    assert shared.find("shareable") is not None
    assert _attrs(shared.find("driver"))["error_policy"] == "stop"
    cdrom = disks["cloudinit"]
    assert _attrs(cdrom.find("target"))["bus"] == "sata"


def _check_interfaces(root: ET.Element) -> None:
    ifaces = _by_alias(root, "interface")
    e1000e = ifaces["default"]
    assert _attrs(e1000e.find("model"))["type"] == "e1000e"
    address = _attrs(e1000e.find("address"))
    assert (address["bus"], address["slot"], address["function"]) == ("0x00", "0x0a", "0x0")
    assert _attrs(e1000e.find("acpi"))["index"] == "3"
    assert _attrs(e1000e.find("boot"))["order"] == "3"
    sec = ifaces["sec"]
    assert _attrs(sec.find("model"))["type"] == "virtio"
    assert _attrs(sec.find("driver"))["queues"] == "2"
    assert _attrs(sec.find("link"))["state"] == "down"


def test_a_q35_guest_runs_with_every_disk_and_interface_option(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """The VM's VMI is defaulted to q35 and runs; the domain has spare pcie-root-ports,
    each disk's cache/io/errorPolicy/blockio/readonly/shareable/serial/boot/iothread/queues
    and each NIC's model/address/acpi/boot/queues/link as asked; the guest prints its
    cloud-init user data (the sata CD-ROM on ICH9's AHCI) and the dhcpOptions of its lease
    (boot file, TFTP server, NTP servers, private option 240 as hex); the sec NIC's carrier
    is 0, then 1 and 0 again as the VM's interface state is edited up and down."""
    k, ns = real_stack, real_namespace
    address = real_cluster.fleet().plan.secondary_addr(20)
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "opts-shared"},
             "spec": {"accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": "64Mi"}}}}  # fmt: skip
    _apply(k, ns, claim, _bridge_nad("opts-net", f"{address}/25"), _vm("opts-net"))
    vmi = _running_vmi(k, ns, NAME)
    assert vmi["spec"]["domain"]["machine"]["type"] == "q35"
    root = _domain_xml(real_cluster, vmi)
    assert "q35" in (_attrs(root.find("os/type"))["machine"])
    ports = [c for c in root.iterfind("devices/controller") if c.get("model") == "pcie-root-port"]
    used = {
        el.find("address").get("bus")  # type: ignore[union-attr]
        for el in root.iterfind("devices/*")
        if el.find("address") is not None and el.find("address").get("type") == "pci"  # type: ignore[union-attr]
    }
    free = [p for p in ports if f"0x{int(p.get('index', '0')):02x}" not in used]
    assert len(free) >= 3, f"{len(ports)} root ports, {len(free)} free"
    _check_disks(root)
    _check_interfaces(root)
    serial = _guest_says(real_cluster, vmi, "KUBEVIRT-PY-USERDATA-END", "KUBEVIRT-PY-DHCP-OPTIONS")
    assert "opts: yes" in serial
    private = b"kvpy-private".hex()
    line = rf"KUBEVIRT-PY-DHCP-OPTIONS \S+ bootfile=pxelinux.0 tftp=tftp.kvpy.test ntpsrv=198.51.100.7 198.51.100.8 .*opt240={private}"
    assert re.search(line, serial), serial[-1500:]
    _toggle_link(k, real_cluster, vmi, root)


def _carrier(cluster: Cluster, vmi: dict[str, Any], mac: str) -> str:
    """The guest's carrier (0 or 1) of the NIC with this MAC."""
    script = "for d in /sys/class/net/eth*; do echo $(cat $d/address) $(cat $d/carrier); done"
    lines = _guest_sh(cluster, vmi, script).split("\n")
    (found,) = [x.split()[1] for x in lines if x.startswith(mac.lower())]
    return found


def _toggle_link(k: Kubectl, cluster: Cluster, vmi: dict[str, Any], root: ET.Element) -> None:
    """The VM's sec interface edited up, then down: the guest's carrier follows, same VMI,
    and the VM never needs a restart."""
    ns, uid = vmi["metadata"]["namespace"], vmi["metadata"]["uid"]
    mac = _attrs(_by_alias(root, "interface")["sec"].find("mac"))["address"]
    _agent_connected(k, ns, NAME)
    assert _carrier(cluster, vmi, mac) == "0"
    for state, carrier in (("up", "1"), ("down", "0")):
        patch = [{"op": "add", "path": "/spec/template/spec/domain/devices/interfaces/1/state",
                  "value": state}]  # fmt: skip
        k("patch", "vm", NAME, "-n", ns, "--type=json", "-p", json.dumps(patch))

        def seen(want: str = carrier) -> bool:
            return _carrier(cluster, vmi, mac) == want

        _wait(seen, 120, f"the guest's carrier {carrier} after state {state}",
              lambda: k("get", "vmi", NAME, "-n", ns, "-o", "jsonpath={.spec.domain.devices}"))  # fmt: skip
        current = json.loads(k("get", "vmi", NAME, "-n", ns, "-o", "json"))
        assert current["metadata"]["uid"] == uid
        assert current["spec"]["domain"]["devices"]["interfaces"][1]["state"] == state
        vm = json.loads(k("get", "vm", NAME, "-n", ns, "-o", "json"))
        kinds = [c["type"] for c in vm.get("status", {}).get("conditions", [])]
        assert "RestartRequired" not in kinds, vm["status"]
