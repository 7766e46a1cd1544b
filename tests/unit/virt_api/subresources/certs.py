"""Test certificates made by scripts/gen-certs (the real tool), plus odd ones for refusals."""

from __future__ import annotations

import functools
import importlib.util
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[4]
GEN_CERTS = REPO / "scripts" / "gen-certs"
HANDLER_SERVER_NAME = "virt-handler.kubevirt.svc"


@functools.cache
def kvcerts() -> ModuleType:
    """scripts/lib/kvcerts.py, imported by path (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("kvcerts", REPO / "scripts/lib/kvcerts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("kvcerts", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True, slots=True)
class Pki:
    """The output directory of scripts/gen-certs."""

    root: Path

    @property
    def ca(self) -> tuple[Path, Path]:
        return self.root / "ca" / "ca.crt", self.root / "ca" / "ca.key"

    @property
    def api(self) -> Path:
        return self.root / "virt-api-certs"

    @property
    def controller(self) -> Path:
        return self.root / "virt-controller-handler-client"

    @property
    def handler(self) -> Path:
        return self.root / "virt-handler-certs"


def gen_certs(root: Path, *args: str) -> tuple[Pki, str]:
    """Run scripts/gen-certs; the Pki and the printed caBundle (its last line)."""
    proc = subprocess.run(
        [str(GEN_CERTS), "--out", str(root), *args], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return Pki(root), proc.stdout.strip().splitlines()[-1]


def client_cert(out: Path, *, cn: str, ca: tuple[Path, Path]) -> Path:
    """A client certificate for `cn` signed by `ca`, as a tls.crt/tls.key/ca.crt directory."""
    tool = kvcerts()
    leaf = tool.Leaf(secret=f"client-{cn}", cn=cn, server=False)
    path: Path = tool.ensure_leaf(out, leaf, ca=ca, days=1)
    return path


def foreign_ca(out: Path) -> tuple[Path, Path]:
    """Another CA (same name, different key): nothing of ours trusts it."""
    ca: tuple[Path, Path] = kvcerts().ensure_ca(out, days=1)
    return ca
