"""The device-plugin API's protobuf codec (shared.deviceplugin): golden bytes derived by
hand from the protobuf wire format, round trips, and what a decoder must tolerate."""

from __future__ import annotations

from typing import Any

import pytest

from shared.deviceplugin import (
    AllocateRequest,
    AllocateResponse,
    ContainerAllocateRequest,
    ContainerAllocateResponse,
    DecodeError,
    Device,
    DevicePluginOptions,
    DeviceSpec,
    Empty,
    ListAndWatchResponse,
    Mount,
    PreferredAllocationRequest,
    PreferredAllocationResponse,
    PreStartContainerRequest,
    RegisterRequest,
)
from shared.deviceplugin.messages import (
    ContainerPreferredAllocationRequest,
    ContainerPreferredAllocationResponse,
)
from shared.deviceplugin.protowire import varint

REGISTER = RegisterRequest(
    version="v1beta1",
    endpoint="kubevirt-tun.sock",
    resource_name="devices.kubevirt.io/tun",
    options=DevicePluginOptions(get_preferred_allocation_available=True),
)
# field 1 (LEN, tag 0x0a) 7 bytes; field 2 (0x12) 17; field 3 (0x1a) 23; field 4 (0x22) a
# 2-byte DevicePluginOptions holding field 2 as a varint (tag 0x10) = 1.
# fmt: off
REGISTER_BYTES = (
    b"\x0a\x07v1beta1"
    b"\x12\x11kubevirt-tun.sock"
    b"\x1a\x17devices.kubevirt.io/tun"
    b"\x22\x02\x10\x01"
)
# fmt: on
ALLOCATE = AllocateResponse(
    container_responses=(
        ContainerAllocateResponse(
            envs={"A": "b"},
            devices=(
                DeviceSpec(container_path="/dev/kvm", host_path="/dev/kvm", permissions="rw"),
            ),
        ),
    )
)
# One ContainerAllocateResponse (34 bytes): a map entry {1: "A", 2: "b"} as field 1, then
# a 24-byte DeviceSpec as field 3 (tag 0x1a).
# fmt: off
ALLOCATE_BYTES = (
    b"\x0a\x22"
    b"\x0a\x06\x0a\x01A\x12\x01b"
    b"\x1a\x18\x0a\x08/dev/kvm\x12\x08/dev/kvm\x1a\x02rw"
)
# fmt: on


@pytest.mark.parametrize(
    ("message", "wire"),
    [
        pytest.param(REGISTER, REGISTER_BYTES, id="register-request"),
        pytest.param(ALLOCATE, ALLOCATE_BYTES, id="allocate-response"),
        pytest.param(Empty(), b"", id="empty"),
        pytest.param(RegisterRequest(), b"", id="all-defaults-are-omitted"),
        pytest.param(
            RegisterRequest(options=DevicePluginOptions()), b"\x22\x00", id="empty-submessage-kept"
        ),
        pytest.param(
            ContainerPreferredAllocationRequest(allocation_size=-1),
            b"\x18" + b"\xff" * 9 + b"\x01",
            id="negative-int-ten-byte-varint",
        ),
    ],
)
def test_golden_bytes(message: Any, wire: bytes) -> None:
    """Encoding gives exactly the hand-derived protobuf bytes, and they decode back."""
    assert message.encode() == wire
    assert type(message).decode(wire) == message


ROUND_TRIPS = [
    ListAndWatchResponse(
        devices=(Device(id="tun-0", health="Healthy"), Device(id="tun-1", health="Unhealthy"))
    ),
    AllocateRequest(
        container_requests=(
            ContainerAllocateRequest(devices_ids=("kvm-0", "kvm-1")),
            ContainerAllocateRequest(devices_ids=("kvm-2",)),
        )
    ),
    ContainerAllocateResponse(
        envs={"Z": "1", "A": "ünïcode"},
        mounts=(Mount(container_path="/c", host_path="/h", read_only=True),),
        annotations={"k": "v"},
    ),
    PreferredAllocationRequest(
        container_requests=(
            ContainerPreferredAllocationRequest(
                available_device_ids=("a", "b"), must_include_device_ids=("b",), allocation_size=2
            ),
        )
    ),
    PreferredAllocationResponse(
        container_responses=(ContainerPreferredAllocationResponse(device_ids=("b", "a")),)
    ),
    PreStartContainerRequest(devices_ids=("x",)),
]


@pytest.mark.parametrize("message", ROUND_TRIPS, ids=lambda m: type(m).__name__)
def test_round_trip(message: Any) -> None:
    """decode(encode(m)) == m for every message shape (repeated, nested, maps, bools)."""
    assert type(message).decode(message.encode()) == message


def test_map_encoding_is_deterministic() -> None:
    """Map entries are written sorted by key, so equal messages give equal bytes."""
    a = ContainerAllocateResponse(envs={"b": "2", "a": "1"})
    b = ContainerAllocateResponse(envs={"a": "1", "b": "2"})
    assert a.encode() == b.encode()


def test_unknown_fields_are_skipped() -> None:
    """Fields this model does not know (a Device's TopologyInfo, a fixed64, a future
    varint) are skipped, as protobuf requires, and the known ones still decode."""
    topology = b"\x1a\x04\x0a\x02\x08\x01"  # field 3: TopologyInfo{nodes: [{ID: 1}]}
    fixed64 = b"\x21" + b"\x00" * 8  # field 4, wire type 1
    future = b"\x28\x07"  # field 5, varint
    data = b"\x0a\x05kvm-0\x12\x07Healthy" + topology + fixed64 + future
    assert Device.decode(data) == Device(id="kvm-0", health="Healthy")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(b"\x0a\x07v1be", "announced", id="truncated-length"),
        pytest.param(b"\x08\xff", "truncated varint", id="truncated-varint"),
        pytest.param(b"\x0a\x02\xff\xfe", "not UTF-8", id="bad-utf8"),
        pytest.param(b"\x08\x01", "expected a length-delimited", id="wrong-wire-type"),
        pytest.param(b"\x00\x01", "field number 0", id="field-zero"),
        pytest.param(b"\x0b", "wire type 3", id="group-wire-type"),
        pytest.param(b"\x08" + b"\xff" * 10 + b"\x01", "longer than 10", id="varint-too-long"),
    ],
)
def test_malformed_input_raises_decode_error(data: bytes, message: str) -> None:
    """Bad bytes raise DecodeError saying what is wrong, never a bare IndexError."""
    with pytest.raises(DecodeError, match=message):
        RegisterRequest.decode(data)


@pytest.mark.parametrize(
    ("value", "wire"),
    [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02")],
)
def test_varint(value: int, wire: bytes) -> None:
    """Base-128 varints, least significant group first (300 → ac 02, the spec's example)."""
    assert varint(value) == wire


def test_healthy_count() -> None:
    """ListAndWatchResponse.healthy() counts only devices reported exactly "Healthy"."""
    response = ListAndWatchResponse(
        devices=(Device(id="a", health="Healthy"), Device(id="b", health="Unhealthy"))
    )
    assert response.healthy() == 1
