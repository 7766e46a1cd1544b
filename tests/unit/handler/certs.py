"""Throwaway certificates for mutual-TLS tests, made with the openssl CLI."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


@dataclass(frozen=True, slots=True)
class Pair:
    cert: Path
    key: Path


def _run(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def ca(directory: Path, name: str) -> Pair:
    pair = Pair(directory / f"{name}.crt", directory / f"{name}.key")
    _run(
        "req",
        "-x509",
        *_EC,
        "-keyout",
        str(pair.key),
        "-out",
        str(pair.cert),
        "-days",
        "1",
        "-subj",
        f"/CN={name}",
    )
    return pair


def leaf(
    directory: Path, name: str, issuer: Pair, *, server: bool, usage: str | None = None
) -> Pair:
    pair = Pair(directory / f"{name}.crt", directory / f"{name}.key")
    csr, ext = directory / f"{name}.csr", directory / f"{name}.ext"
    usage = usage or ("serverAuth" if server else "clientAuth")
    san = "subjectAltName=IP:127.0.0.1,DNS:localhost\n" if server else ""
    ext.write_text(f"{san}extendedKeyUsage={usage}\n")
    _run("req", "-new", *_EC, "-keyout", str(pair.key), "-out", str(csr), "-subj", f"/CN={name}")
    _run(
        "x509", "-req", "-in", str(csr), "-CA", str(issuer.cert), "-CAkey", str(issuer.key),
        "-CAcreateserial", "-out", str(pair.cert), "-days", "1", "-extfile", str(ext),
    )  # fmt: skip
    return pair
