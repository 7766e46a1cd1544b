"""The benchmark floors' pure parts: the floor boots the launcher's own domain XML with only
the per-guest fields changed, and the launcher's migrate time is read from its pod log."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "scripts" / "bench"))

from floor_libvirt import GUEST_RUN, FloorGuest, Template, guest_xml
from floor_migration import launcher_seconds

LAUNCHER_XML = f"""<domain type='qemu'>
  <name>default_floor</name>
  <uuid>b44bb507-c086-4a4f-a7ac-0c04d7f77d2e</uuid>
  <memory unit='KiB'>131072</memory>
  <resource><partition>/machine/kvpy-b44bb507</partition></resource>
  <os><type arch='x86_64' machine='pc-i440fx-7.2'>hvm</type><kernel>/t/kernel</kernel></os>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='/t/private/disks/containerdisk-overlay.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <interface type='user'><mac address='52:54:00:da:e7:ae'/></interface>
    <serial type='unix'>
      <source mode='bind' path='{GUEST_RUN}/console.sock'/>
      <log file='/t/private/libvirt/log/kvpy/serial.log' append='on'/>
    </serial>
    <channel type='unix'><source mode='bind' path='{GUEST_RUN}/agent.sock'/></channel>
  </devices>
</domain>"""


def test_guest_xml_changes_only_the_per_guest_fields(tmp_path: Path) -> None:
    """Each floor guest gets its own name, uuid, overlay, serial log, sockets and MAC, and
    no cgroup partition; the rest (memory, kernel, machine) stays the launcher's."""
    template = Template(xml=LAUNCHER_XML, backing=tmp_path / "disk.qcow2", work=tmp_path)
    guest = FloorGuest(index=7, root=tmp_path / "g007")
    dom = ET.fromstring(guest_xml(template, guest, sockets=f"{GUEST_RUN}/floor_007"))
    assert dom.findtext("name") == "floor_007"
    assert dom.findtext("uuid") != "b44bb507-c086-4a4f-a7ac-0c04d7f77d2e"
    assert dom.find("resource") is None
    assert dom.findtext("memory") == "131072"
    assert dom.findtext("os/kernel") == "/t/kernel"
    disk = dom.find("devices/disk/source")
    assert disk is not None and disk.attrib["file"] == str(guest.root / "overlay.qcow2")
    log = dom.find("devices/serial/log")
    assert log is not None and log.attrib["file"] == str(guest.serial_log)
    paths = {s.attrib["path"] for s in dom.iter("source") if "path" in s.attrib}
    assert paths == {f"{GUEST_RUN}/floor_007/console.sock", f"{GUEST_RUN}/floor_007/agent.sock"}
    mac = dom.find("devices/interface/mac")
    assert mac is not None and mac.attrib["address"] == "52:54:00:f1:00:07"


def test_launcher_seconds_reads_migration_succeeded_from_launcher_pod_logs(tmp_path: Path) -> None:
    """Only launcher pods' `migration_succeeded` lines count, whatever the key order."""
    pod = tmp_path / "node01" / "ns_virt-launcher-a-x_uid" / "compute"
    pod.mkdir(parents=True)
    (pod / "0.log").write_text(
        '2026-11-25T20:39:27.9Z stderr F {"seconds": 0.973, "event": "migration_succeeded"}\n'
        '2026-11-25T20:39:28.0Z stderr F {"event": "migration_started", "seconds": 9}\n'
    )
    other = tmp_path / "node01" / "kubevirt_virt-handler-x_uid" / "handler"
    other.mkdir(parents=True)
    (other / "0.log").write_text('{"event": "migration_succeeded", "seconds": 5.0}\n')
    assert launcher_seconds(tmp_path) == [0.973]
