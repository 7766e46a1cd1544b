"""The migration pairs' pure parts (bench-handler (k), issue 37): the two links read from
`ip -j` in a handler pod, a missing link named before anything is measured (only the links
a block needs), the proxy's new rounds told apart from earlier ones, and the report's
ratio against the 1.2x target per network."""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "scripts" / "bench"))

from floor_migration import Network, PodLinks
from migration_pairs import (
    HostLoad,
    LinkMissing,
    Pairs,
    check_links,
    new_seconds,
    parse_addresses,
    pod_pid,
    report,
)

IP_JSON = json.dumps(
    [
        {"ifname": "lo", "addr_info": [{"family": "inet", "local": "127.0.0.1"}]},
        {"ifname": "eth0", "addr_info": [{"family": "inet", "local": "10.244.1.7"}]},
        {"ifname": "migration0", "addr_info": [{"family": "inet", "local": "198.18.0.13.2"}]},
    ]
)


def _links(node: str, **addresses: str) -> PodLinks:
    return PodLinks(
        node=node,
        netns=Path("/proc/1/ns/net"),
        addresses={Network(k): v for k, v in addresses.items()},
    )


def test_parse_addresses_reads_eth0_and_migration0_only() -> None:
    """eth0 is the pod network, migration0 the migration network; lo and other links are
    not a network the pairs measure."""
    assert parse_addresses(IP_JSON) == {
        Network.POD: "10.244.1.7",
        Network.MIGRATION: "198.18.0.13.2",
    }
    assert parse_addresses("") == {}


@pytest.mark.parametrize(
    ("links", "named"),
    [
        pytest.param(
            [_links("node01", eth0="10.0.1.2"), _links("node02", eth0="10.0.2.2", migration0="b")],
            "node node01: the virt-handler pod has no IPv4 address on its migration0",
            id="no-migration0",
        ),
        pytest.param(
            [_links("node01", eth0="a", migration0="b")],
            "node node02 has no running virt-handler pod",
            id="no-handler-pod",
        ),
    ],
)
def test_a_missing_link_is_a_failure_naming_node_and_link(
    links: list[PodLinks], named: str
) -> None:
    """check_links raises LinkMissing naming the node and the interface it lacks."""
    with pytest.raises(LinkMissing, match=named):
        check_links(links, ["node01", "node02"])


def test_both_links_on_both_nodes_pass() -> None:
    """Two handler pods with eth0 and migration0 addresses: nothing is missing."""
    both = [_links(n, eth0="a", migration0="b") for n in ("node01", "node02")]
    check_links(both, ["node01", "node02"])


def test_with_migrations_network_off_only_the_pod_network_is_needed() -> None:
    """While the CR names no migration network the handler pods have no migration0: the
    pod-network block needs eth0 alone, and still fails without it."""
    pod_only = [_links(n, eth0="a") for n in ("node01", "node02")]
    check_links(pod_only, ["node01", "node02"], need=(Network.POD,))
    with pytest.raises(LinkMissing, match=r"node node02: .* no IPv4 address on its eth0"):
        check_links([pod_only[0], _links("node02")], ["node01", "node02"], need=(Network.POD,))


def test_new_seconds_are_the_rounds_added_since() -> None:
    """The kept logs grow: the pod network's rounds are what is new, duplicates kept."""
    assert new_seconds([0.9, 1.0], [1.0, 0.9, 0.8, 0.8]) == [0.8, 0.8]


def test_pod_pid_finds_a_process_by_its_pod_cgroup(tmp_path: Path) -> None:
    """A process whose cgroup names the pod's uid (systemd's underscores too) is found."""
    for pid, cgroup in (("12", "0::/other\n"), ("34", "4:cpu:/kubepods/pod1b2c_3d/abc\n")):
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "cgroup").write_text(cgroup)
    (tmp_path / "self").mkdir()
    assert pod_pid("1b2c-3d", proc=tmp_path) == 34
    assert pod_pid("ffff", proc=tmp_path) is None


def test_report_prints_each_pair_with_its_ratio_and_verdict() -> None:
    """Each network gets raw and proxy medians and the ratio against 1.2x, the host's load
    is printed beside them; a network without a figure says FAILED."""
    pairs = Pairs(
        proxy={Network.MIGRATION: [0.80, 0.90, 1.00], Network.POD: []},
        raw={Network.MIGRATION: [(0.70, 40), (0.60, 50)], Network.POD: [(0.7, 30)]},
        host=HostLoad(busy_cores=1.234, load=(5.0, 3.25)),
    )
    out = io.StringIO()
    with redirect_stdout(out):
        report(pairs)
    text = out.getvalue()
    assert "0.90 s (rounds 0.80, 0.90, 1.00) -> 1.38x raw (target <= 1.2x): MISSED" in text
    assert "raw libvirt median 0.65 s" in text
    assert "1.23 of" in text and "load average 5.0 at the start, 3.2 at the end" in text
    assert "FAILED: no figure (1 raw, 0 proxy migrations)" in text
