"""The exporter over real HTTPS on loopback, with a certificate the export controller makes:
the client trusts the CA alone under the Service's name; raw and gzip bytes equal the disk;
a missing or wrong token is 401; an unknown volume 404; readiness needs no token."""

from __future__ import annotations

import contextlib
import gzip
import io
import ssl
import tarfile
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from controller.export.certs import make_certs
from exportserver.main import ConfigError, parse
from exportserver.server import ServerConfig, build_app, disk_path

DISK = bytes(range(256)) * 4096 + b"tail"
HOST = "virt-export-exp.ns.svc"
TOKEN = "s3cret-token-0123456"


@contextlib.asynccontextmanager
async def serving(tmp_path: Path) -> AsyncIterator[tuple[str, ssl.SSLContext]]:
    (tmp_path / "vol" / "disk").mkdir(parents=True)
    (tmp_path / "vol" / "disk" / "disk.img").write_bytes(DISK)
    certs = make_certs(service="virt-export-exp", namespace="ns", valid=timedelta(hours=1))
    (tmp_path / "tls.crt").write_text(certs.cert)
    (tmp_path / "tls.key").write_text(certs.key)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    app = build_app(ServerConfig(volumes_dir=tmp_path / "vol", token=TOKEN, chunk=4096))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_tls)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"https://127.0.0.1:{port}", ssl.create_default_context(cadata=certs.ca)
    finally:
        await runner.cleanup()


async def fetch(base: str, tls: ssl.SSLContext, path: str, **headers: str) -> tuple[int, bytes]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(base + path, ssl=tls, server_hostname=HOST, headers=headers) as resp,
    ):
        return resp.status, await resp.read()


async def test_raw_and_gzip_downloads_equal_the_disk(tmp_path: Path) -> None:
    """With the token (header or query), raw is the disk and gzip decompresses to it; the
    certificate verifies against the CA under the Service's DNS name."""
    async with serving(tmp_path) as (base, tls):
        status, raw = await fetch(
            base, tls, "/volumes/disk/disk.img", **{"x-kubevirt-export-token": TOKEN}
        )
        assert status == 200 and raw == DISK
        status, packed = await fetch(
            base, tls, f"/volumes/disk/disk.img.gz?x-kubevirt-export-token={TOKEN}"
        )
        assert status == 200 and gzip.decompress(packed) == DISK


async def test_bad_token_unknown_volume_and_readiness(tmp_path: Path) -> None:
    """No token or a wrong one: 401; an unknown or malformed volume: 404; /exportready: 200
    without a token."""
    async with serving(tmp_path) as (base, tls):
        assert (await fetch(base, tls, "/volumes/disk/disk.img"))[0] == 401
        wrong = {"x-kubevirt-export-token": "nope"}
        assert (await fetch(base, tls, "/volumes/disk/disk.img.gz", **wrong))[0] == 401
        good = {"x-kubevirt-export-token": TOKEN}
        assert (await fetch(base, tls, "/volumes/other/disk.img", **good))[0] == 404
        assert (await fetch(base, tls, "/volumes/..%2Fetc/disk.img", **good))[0] == 404
        assert (await fetch(base, tls, "/exportready"))[0] == 200


def test_disk_path_refuses_escapes(tmp_path: Path) -> None:
    """Only a DNS-style volume name below the volumes directory resolves."""
    (tmp_path / "disk").mkdir()
    (tmp_path / "disk" / "disk.img").write_bytes(b"x")
    assert disk_path(tmp_path, "disk") == tmp_path / "disk" / "disk.img"
    assert disk_path(tmp_path, "..") is None
    assert disk_path(tmp_path, "missing") is None


def test_missing_token_file_is_a_config_error(tmp_path: Path) -> None:
    """The server refuses to start without its token, naming the flag."""
    with pytest.raises(ConfigError, match="--token-file"):
        parse([f"--token-file={tmp_path / 'none'}"])
    (tmp_path / "t").write_text("tok\n")
    assert parse([f"--token-file={tmp_path / 't'}"]).server.token == "tok"


async def test_a_claim_of_files_comes_as_a_tar_gz(tmp_path: Path) -> None:
    """disk.tar.gz (a memory dump's claim): the claim's files, named as on the claim, in a
    gzip-compressed tar; the token is needed as for the disk."""
    async with serving(tmp_path) as (base, tls):
        (tmp_path / "vol" / "disk" / "vm-dump-20261129-140506.memory.dump").write_bytes(DISK)
        path = "/volumes/disk/disk.tar.gz"
        assert (await fetch(base, tls, path))[0] == 401
        status, body = await fetch(base, tls, path, **{"x-kubevirt-export-token": TOKEN})
    assert status == 200
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        names = sorted(tar.getnames())
        dump = tar.extractfile("vm-dump-20261129-140506.memory.dump")
        assert dump is not None and dump.read() == DISK
    assert names == ["disk.img", "vm-dump-20261129-140506.memory.dump"]
