"""A process-mode cluster's host address: one /32 of 198.19.254.0/24 on `lo` per cluster,
claimed by `up`, kept across restarts, never shared, released by `down`."""

from __future__ import annotations

import ipaddress
import subprocess
from pathlib import Path

import pytest

from localkube import hostaddr
from localkube.errors import LocalKubeError


class FakeIp:
    """`ip` over an address table of `lo` (what `ip -4 -o addr show` prints)."""

    def __init__(self, taken: set[str] | None = None, *, exists: str = "") -> None:
        self.addrs = set(taken or ())
        # what `ip addr add` says of an address already there: iproute2 6.1 (Debian 12)
        # prints this; older ones "RTNETLINK answers: File exists"
        self.exists = exists or "Error: ipv4: Address already assigned."

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        def done(rc: int = 0, out: str = "", err: str = "") -> subprocess.CompletedProcess[str]:
            return subprocess.CompletedProcess(["ip", *args], rc, out, err)

        if args[:2] == ("addr", "add"):
            if args[2] in self.addrs:
                return done(2, err=self.exists)
            self.addrs.add(args[2])
            return done()
        if args[:2] == ("addr", "del"):
            self.addrs.discard(args[2])
            return done()
        lines = [f"1: lo    inet {a} scope global lo" for a in sorted(self.addrs)]
        return done(out="\n".join(["1: lo    inet 127.0.0.1/8 scope host lo", *lines]))


@pytest.fixture
def fake_ip(monkeypatch: pytest.MonkeyPatch) -> FakeIp:
    fake = FakeIp()
    monkeypatch.setattr(hostaddr, "_ip", fake)
    return fake


def test_claim_is_in_the_block_kept_and_released(fake_ip: FakeIp, tmp_path: Path) -> None:
    """The address is a host of 198.19.254.0/24 (inside 198.18.0.0/15), the same on a
    second `up`, and gone from `lo` and the state dir after `down`."""
    ip = hostaddr.claim(tmp_path, cluster_id="c1")
    assert ipaddress.IPv4Address(ip) in hostaddr.BLOCK
    assert ipaddress.IPv4Address(ip) in ipaddress.IPv4Network("198.18.0.0/15")
    assert hostaddr.claim(tmp_path, cluster_id="c1") == ip == hostaddr.host_address(tmp_path)
    assert fake_ip.addrs == {f"{ip}/32"}
    hostaddr.release(tmp_path)
    assert fake_ip.addrs == set()
    with pytest.raises(LocalKubeError, match="not up"):
        hostaddr.host_address(tmp_path)
    hostaddr.release(tmp_path)  # nothing claimed: nothing to do


@pytest.mark.parametrize(
    "exists", ["Error: ipv4: Address already assigned.", "RTNETLINK answers: File exists"]
)
def test_two_clusters_never_share_an_address(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, exists: str
) -> None:
    """A cluster whose preferred address is taken by another takes the next free one,
    whichever way iproute2 words the refusal (two process-mode clusters at once: a test
    session's and bench-controller's, or two sessions')."""
    fake_ip = FakeIp(exists=exists)
    monkeypatch.setattr(hostaddr, "_ip", fake_ip)
    first = hostaddr.claim(tmp_path / "a", cluster_id="same")
    second = hostaddr.claim(tmp_path / "b", cluster_id="same")
    assert first != second
    assert fake_ip.addrs == {f"{first}/32", f"{second}/32"}


def test_an_address_that_cannot_be_added_is_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No permission (or no `lo`): a clear error naming the address, nothing saved."""

    def refused(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(
            ["ip", *args], 2, "", "RTNETLINK answers: Operation not permitted"
        )

    monkeypatch.setattr(hostaddr, "_ip", refused)
    with pytest.raises(LocalKubeError, match=r"cannot add 198\.19\.254\.\d+/32 to lo"):
        hostaddr.claim(tmp_path, cluster_id="c1")
    assert not (tmp_path / hostaddr.ADDRESS_FILE).exists()
