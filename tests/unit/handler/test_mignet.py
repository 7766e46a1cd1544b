"""The handler's end of the migration network: its `migration0` address found in its own
network namespace, the proxy listening and advertising there and dialling from it when the
target is on that network, the pod network otherwise."""

from __future__ import annotations

from ipaddress import IPv4Interface
from pathlib import Path

from handler.mignet import interface_address
from handler.migration_proxy import SourceProxy, TargetProxy
from handler.migration_tls import HANDLER_CN, ProxyConfig
from tests.unit.handler import certs
from tests.unit.handler.test_migration_proxy import cert_dir

MIGRATION_NET = IPv4Interface("127.0.0.2/8")


def proxy_config(tmp_path: Path, environ: dict[str, str] | None = None) -> ProxyConfig:
    ca = certs.ca(tmp_path, "kubevirt-py-ca")
    secret = cert_dir(tmp_path, ca, HANDLER_CN, "serverAuth,clientAuth")
    env = {"VIRT_HANDLER_MIGRATION_CERT_DIR": str(secret), "POD_IP": "10.1.2.3", **(environ or {})}
    config = ProxyConfig.from_env(env, migration_network=lambda: MIGRATION_NET)
    assert config is not None
    return config


def test_an_interface_address_and_none_without_one() -> None:
    """lo has 127.0.0.1/8; a missing interface has no address."""
    assert interface_address("lo") == IPv4Interface("127.0.0.1/8")
    assert interface_address("no-such-if0") is None


def test_the_proxy_listens_and_advertises_on_the_migration_network(tmp_path: Path) -> None:
    """With migration0: host and advertised address are its address, not POD_IP; dialling a
    target on that network binds to it, anything else is left to the routing table."""
    config = proxy_config(tmp_path)
    assert (config.host, config.advertise_host) == ("127.0.0.2", "127.0.0.2")
    assert config.local_address("127.0.0.9") == ("127.0.0.2", 0)
    assert config.local_address("10.1.2.4") is None
    assert config.local_address("node02") is None


def test_without_migration0_the_pod_network_stays(tmp_path: Path) -> None:
    """No migration0: listen everywhere, advertise POD_IP, dial from anywhere."""
    ca = certs.ca(tmp_path, "kubevirt-py-ca")
    secret = cert_dir(tmp_path, ca, HANDLER_CN, "serverAuth,clientAuth")
    config = ProxyConfig.from_env(
        {"VIRT_HANDLER_MIGRATION_CERT_DIR": str(secret), "POD_IP": "10.1.2.3"}
    )
    assert config is not None
    assert (config.host, config.advertise_host, config.network) == ("0.0.0.0", "10.1.2.3", None)
    assert config.local_address("10.1.2.4") is None


def test_explicit_hosts_win(tmp_path: Path) -> None:
    """VIRT_HANDLER_MIGRATION_HOST / ADVERTISE_HOST set: they are used as given."""
    env = {
        "VIRT_HANDLER_MIGRATION_HOST": "0.0.0.0",
        "VIRT_HANDLER_MIGRATION_ADVERTISE_HOST": "10.9.9.9",
    }
    config = proxy_config(tmp_path, env)
    assert (config.host, config.advertise_host) == ("0.0.0.0", "10.9.9.9")


async def test_streams_cross_between_migration_network_addresses(tmp_path: Path) -> None:
    """The target end listens only on the migration address; the source end reaches it
    from that address (the domain XML read across)."""
    config = proxy_config(tmp_path)
    target = TargetProxy(config, migration_uid="m1", sockets={}, domain_xml="<domain/>")
    ports = await target.open()
    try:
        bound = {s.getsockname()[0] for s in target._listeners}
        assert bound == {"127.0.0.2"}
        source = SourceProxy(
            config,
            migration_uid="m1",
            host=config.advertise_host,
            ports=ports,
            directory=tmp_path / "src",
        )
        assert await source.domain_xml() == "<domain/>"
    finally:
        await target.close()
