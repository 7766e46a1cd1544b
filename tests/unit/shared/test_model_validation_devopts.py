"""Validation of the disk and interface options (shared/model/_validate_devopts.py): each
bad value is refused naming its field; good values pass and are no longer refused as
unsupported."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model import VirtualMachineInstance
from shared.model.unsupported import unsupported_fields
from tests.unit.shared._validation_support import (
    DISKS,
    IFACES,
    edit,
    load,
    messages_at,
    vmi_errors,
)

D0, D1, I0 = f"{DISKS}[0]", f"{DISKS}[1]", f"{IFACES}[0]"

GOOD: dict[str, Any] = {
    f"{D0}.cache": "none",
    f"{D0}.io": "native",
    f"{D0}.errorPolicy": "report",
    f"{D0}.blockSize": {"custom": {"logical": 512, "physical": 4096, "discardGranularity": 8192}},
    f"{D0}.dedicatedIOThread": True,
    f"{D0}.shareable": True,
    f"{D0}.disk.readonly": True,
    f"{D0}.disk.pciAddress": "0000:00:0b.0",
    f"{DISKS}[1].cdrom": {"bus": "sata", "tray": "closed"},
    f"{D1}.blockSize": {"matchVolume": {"enabled": True}},
    "spec.domain.ioThreadsPolicy": "supplementalPool",
    "spec.domain.ioThreads": {"supplementalPoolThreadCount": 2},
    "spec.domain.devices.blockMultiQueue": True,
    "spec.domain.devices.networkInterfaceMultiqueue": True,
    f"{I0}.model": "e1000e",
    f"{I0}.pciAddress": "0000:00:0a.0",
    f"{I0}.acpiIndex": 3,
    f"{I0}.bootOrder": 9,
    f"{I0}.state": "down",
    f"{I0}.dhcpOptions": {
        "bootFileName": "pxelinux.0", "tftpServerName": "tftp.example",
        "ntpServers": ["192.0.2.1"], "privateOptions": [{"option": 240, "value": "x"}],
    },
}  # fmt: skip


def _fixture(changes: dict[str, Any]) -> dict[str, Any]:
    return edit(load("vmi-running.yaml"), changes)


def test_every_option_set_well_is_valid_and_honoured() -> None:
    """A VMI with every honoured option: no validation error, nothing refused."""
    raw = _fixture(GOOD)
    assert vmi_errors(GOOD) == []
    assert unsupported_fields(VirtualMachineInstance.from_dict(raw)) == []


BAD = [
    pytest.param({f"{D0}.cache": "unsafe"}, f"{D0}.cache", id="cache"),
    pytest.param({f"{D0}.io": "io_uring"}, f"{D0}.io", id="io"),
    pytest.param({f"{D0}.errorPolicy": "retry"}, f"{D0}.errorPolicy", id="error-policy"),
    pytest.param({f"{D0}.io": "native", f"{D0}.cache": "writeback"}, f"{D0}.io",
                 id="native-needs-cache-none"),
    pytest.param({f"{D0}.shareable": True, f"{D0}.cache": "writethrough"}, f"{D0}.cache",
                 id="shareable-needs-cache-none"),
    pytest.param({f"{D0}.blockSize": {}}, f"{D0}.blockSize", id="block-size-empty"),
    pytest.param({f"{D0}.blockSize": {"custom": {"logical": 512, "physical": 4096},
                                      "matchVolume": {}}},
                 f"{D0}.blockSize", id="block-size-both"),
    pytest.param({f"{D0}.blockSize": {"custom": {"logical": 1000, "physical": 4096}}},
                 f"{D0}.blockSize.custom.logical", id="block-size-not-power-of-2"),
    pytest.param({f"{D0}.blockSize": {"custom": {"logical": 4096, "physical": 512}}},
                 f"{D0}.blockSize.custom.logical", id="block-size-logical-above-physical"),
    pytest.param({f"{D0}.blockSize": {"custom": {"logical": 512}}},
                 f"{D0}.blockSize.custom.physical", id="block-size-physical-missing"),
    pytest.param({f"{D0}.blockSize": {"custom": {"logical": 4096, "physical": 4096,
                                                 "discardGranularity": 6144}}},
                 f"{D0}.blockSize.custom.discardGranularity", id="discard-not-multiple"),
    pytest.param({f"{D0}.blockSize": {"custom": {"logical": 512, "physical": 512,
                                                 "discardGranularity": -512}}},
                 f"{D0}.blockSize.custom.discardGranularity", id="discard-negative"),
    pytest.param({f"{D0}.blockSize": {"custom": {"logical": 512, "physical": 512,
                                                 "discardGranularity": 2**32}}},
                 f"{D0}.blockSize.custom.discardGranularity", id="discard-above-uint32"),
    pytest.param({f"{D0}.disk": {"bus": "sata"},
                  f"{D0}.blockSize": {"custom": {"logical": 512, "physical": 512,
                                                 "discardGranularity": 4096}}},
                 f"{D0}.blockSize.custom.discardGranularity", id="discard-sata-not-512"),
    pytest.param({f"{DISKS}[1].dedicatedIOThread": True}, f"{DISKS}[1].dedicatedIOThread",
                 id="dedicated-io-thread-not-virtio"),
    pytest.param({"spec.domain.ioThreadsPolicy": "all"}, "spec.domain.ioThreadsPolicy",
                 id="io-threads-policy"),
    pytest.param({"spec.domain.ioThreadsPolicy": "supplementalPool"},
                 "spec.domain.ioThreads.supplementalPoolThreadCount", id="pool-without-count"),
    pytest.param({"spec.domain.ioThreadsPolicy": "supplementalPool",
                  "spec.domain.ioThreads": {"supplementalPoolThreadCount": 0}},
                 "spec.domain.ioThreads.supplementalPoolThreadCount", id="pool-count-zero"),
    pytest.param({"spec.domain.ioThreads": {"supplementalPoolThreadCount": 2}},
                 "spec.domain.ioThreads.supplementalPoolThreadCount", id="count-without-pool"),
    pytest.param({f"{I0}.pciAddress": "00:0a.0"}, f"{I0}.pciAddress", id="pci-address"),
    pytest.param({f"{D0}.disk.pciAddress": "0000:00:0x.0"}, f"{D0}.disk.pciAddress",
                 id="disk-pci-address"),
    pytest.param({f"{D0}.disk": {"bus": "sata", "pciAddress": "0000:00:0b.0"}},
                 f"{D0}.disk.pciAddress", id="disk-pci-address-not-virtio"),
    pytest.param({f"{D0}.disk.pciAddress": "0000:00:0a.0", f"{I0}.pciAddress": "0000:00:0A.0"},
                 f"{I0}.pciAddress", id="pci-address-shared-disk-and-interface"),
    pytest.param({f"{DISKS}[1].cdrom": {"bus": "sata", "tray": "ajar"}},
                 f"{DISKS}[1].cdrom.tray", id="cdrom-tray"),
    pytest.param({f"{I0}.acpiIndex": 0}, f"{I0}.acpiIndex", id="acpi-index"),
    pytest.param({f"{I0}.bootOrder": 0}, f"{I0}.bootOrder", id="boot-order"),
    pytest.param({f"{I0}.bootOrder": 1, f"{D0}.bootOrder": 1}, f"{I0}.bootOrder",
                 id="boot-order-shared-with-a-disk"),
    pytest.param({f"{I0}.state": "sideways"}, f"{I0}.state", id="state"),
    pytest.param({f"{I0}.state": "absent"}, f"{I0}.state", id="state-absent"),
    pytest.param({f"{I0}.model": "virtio-net"}, f"{I0}.model", id="model"),
    pytest.param({f"{I0}.dhcpOptions": {"ntpServers": ["ntp.example"]}},
                 f"{I0}.dhcpOptions.ntpServers[0]", id="ntp-server"),
    pytest.param({f"{I0}.dhcpOptions": {"privateOptions": [{"option": 100, "value": "x"}]}},
                 f"{I0}.dhcpOptions.privateOptions[0].option", id="private-option-range"),
    pytest.param({f"{I0}.dhcpOptions": {"privateOptions": [{"option": 240, "value": "x"},
                                                           {"option": 240, "value": "y"}]}},
                 f"{I0}.dhcpOptions.privateOptions[1].option", id="private-option-twice"),
    pytest.param({f"{I0}.dhcpOptions": {"privateOptions": [{"option": 240}]}},
                 f"{I0}.dhcpOptions.privateOptions[0].value", id="private-option-value"),
    pytest.param({f"{I0}.dhcpOptions": {"bootFileName": ""}},
                 f"{I0}.dhcpOptions.bootFileName", id="boot-file-empty"),
]  # fmt: skip


@pytest.mark.parametrize(("changes", "path"), BAD)
def test_bad_option_values_are_refused_naming_the_field(changes: dict[str, Any], path: str) -> None:
    """Each bad value of a newly honoured option is one error at its own path."""
    assert messages_at(vmi_errors(changes), path), vmi_errors(changes)


def test_discard_granularity_is_honoured_not_refused() -> None:
    """blockSize.custom.discardGranularity (a multiple of logical) is typed and no longer
    refused as unsupported."""
    size = {"custom": {"logical": 512, "physical": 512, "discardGranularity": 4096}}
    raw = _fixture({f"{D0}.blockSize": size})
    vmi = VirtualMachineInstance.from_dict(raw)
    assert unsupported_fields(vmi) == []
    block = vmi.spec.domain.devices.disks[0].block_size
    assert block is not None and block.custom is not None
    assert block.custom.discard_granularity == 4096
    assert vmi.to_dict() == raw
