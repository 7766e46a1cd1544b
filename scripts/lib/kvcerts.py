"""kubevirt-py's certificates for the imperative actions path, made with the openssl CLI.

    kube-apiserver ──(front proxy, cluster CA)──▶ controller subresource API (virt-api cert)
    controller ──(mutual TLS, kubevirt-py CA)──▶ handler actions endpoint (handler cert)
    controller ──(mutual TLS, kubevirt-py CA)──▶ another cluster's controller, :9185
                                                 (synchronization cert, both sides)

Written to OUT (default ~/.cache/kubevirt-py/certs, outside any clone), one directory per
Secret in the kubernetes.io/tls layout the daemons read (tls.crt, tls.key, ca.crt):

    OUT/ca/ca.crt, ca.key                         the kubevirt-py CA (the key stays here)
    OUT/virt-api-certs/                           serving cert of the APIService's Service
    OUT/virt-controller-handler-client/           client cert, CN kubevirt-py-controller
    OUT/virt-handler-certs/                       handler serving cert (virt-handler.<ns>.svc)
    OUT/virt-synchronization-controller-certs/    CN kubevirt-py-synchronization, server and
                                                  client: decentralized migration between
                                                  clusters whose certs one CA signed
    OUT/apiservice-cabundle-patch.yaml            kustomize patch setting the caBundle

Existing files are kept (re-running is idempotent; --force makes everything anew).
`--apply` creates or updates the four Secrets in the namespace with kubectl and sets the
caBundle of the APIService and of the admission webhooks (virt-api-mutator,
virt-api-validator: the same serving certificate) when they exist. The last line printed is the CA bundle
(base64) for APIService.spec.caBundle.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

CONTROLLER_CN = "kubevirt-py-controller"
HANDLER_CN = "kubevirt-py-handler"
SYNC_CN = "kubevirt-py-synchronization"
SYNC_SERVICE = "virt-synchronization-controller"
APISERVICE = "v1.subresources.kubevirt.io"
# Both aggregated APIs virt-api serves, verified against the same CA.
APISERVICES = (APISERVICE, "v1beta1.upload.cdi.kubevirt.io")
WEBHOOK_CONFIGURATIONS = (
    ("mutatingwebhookconfiguration", "virt-api-mutator"),
    ("validatingwebhookconfiguration", "virt-api-validator"),
    ("validatingwebhookconfiguration", "virt-launcher-eviction-interceptor"),
)
CA_DIR = "ca"
SECRETS = (
    "virt-api-certs",
    "virt-controller-handler-client",
    "virt-handler-certs",
    "virt-synchronization-controller-certs",
)
_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Leaf:
    """One leaf certificate: the Secret (directory) it goes to, subject, usage, SANs."""

    secret: str
    cn: str
    server: bool
    sans: tuple[str, ...] = ()
    also_client: bool = False  # the handler's: its migration proxy dials the other handler


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    out: Path
    namespace: str = "kubevirt"
    api_service: str = "virt-api"
    handler_service: str = "virt-handler"
    extra_api_sans: tuple[str, ...] = ()
    extra_handler_sans: tuple[str, ...] = ()
    days: int = 365
    force: bool = False


def service_sans(service: str, namespace: str) -> tuple[str, ...]:
    """The DNS names a Service is reached (and, by the aggregator, verified) by."""
    return tuple(
        f"DNS:{n}"
        for n in (
            service,
            f"{service}.{namespace}",
            f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local",
        )
    )


def leaves(opts: Options) -> list[Leaf]:
    """The four leaf certificates."""
    ns = opts.namespace
    api = (*service_sans(opts.api_service, ns), "IP:127.0.0.1", *opts.extra_api_sans)
    # No *.<ns>.svc wildcard: with one CA in the APIService's caBundle, a handler's key
    # would then also pass as virt-api.<ns>.svc. The controller verifies handlers as
    # virt-handler.<ns>.svc whatever node IP it dials.
    handler = ("IP:127.0.0.1", *service_sans(opts.handler_service, ns), *opts.extra_handler_sans)
    sync = ("IP:127.0.0.1", *service_sans(SYNC_SERVICE, ns))
    return [
        Leaf(secret=SECRETS[0], cn=f"{opts.api_service}.{ns}.svc", server=True, sans=api),
        Leaf(secret=SECRETS[1], cn=CONTROLLER_CN, server=False),
        Leaf(secret=SECRETS[2], cn=HANDLER_CN, server=True, sans=handler, also_client=True),
        # Peers dial the leader's pod IP, in no certificate: they check the CN.
        Leaf(secret=SECRETS[3], cn=SYNC_CN, server=True, sans=sync, also_client=True),
    ]


def _openssl(*args: str | Path) -> None:
    proc = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"openssl {args[0]} failed: {proc.stderr.strip()}")


def ensure_ca(out: Path, *, days: int) -> tuple[Path, Path]:
    """The CA's cert and key (made unless both exist)."""
    ca_dir = out / CA_DIR
    crt, key = ca_dir / "ca.crt", ca_dir / "ca.key"
    if crt.exists() and key.exists():
        return crt, key
    ca_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    _openssl(
        "req", "-x509", "-nodes", *_EC, "-days", str(days * 10),
        "-subj", "/CN=kubevirt-py-ca", "-keyout", key, "-out", crt,
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
    )  # fmt: skip
    os.chmod(key, 0o600)
    return crt, key


def ensure_leaf(out: Path, leaf: Leaf, *, ca: tuple[Path, Path], days: int) -> Path:
    """The leaf's Secret directory (tls.crt, tls.key, ca.crt), made unless complete."""
    sdir = out / leaf.secret
    crt, key = sdir / "tls.crt", sdir / "tls.key"
    sdir.mkdir(parents=True, exist_ok=True, mode=0o700)
    shutil.copyfile(ca[0], sdir / "ca.crt")
    if crt.exists() and key.exists():
        return sdir
    usage = "serverAuth" if leaf.server else "clientAuth"
    if leaf.server and leaf.also_client:
        usage = "serverAuth,clientAuth"
    ext = [
        "basicConstraints=CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        f"extendedKeyUsage={usage}",
    ]
    if leaf.sans:
        ext.append("subjectAltName=" + ",".join(leaf.sans))
    with tempfile.TemporaryDirectory() as tmp:
        csr, extfile = Path(tmp) / "req.csr", Path(tmp) / "ext.cnf"
        extfile.write_text("\n".join(ext) + "\n")
        _openssl(
            "req", "-new", "-nodes", *_EC, "-subj", f"/CN={leaf.cn}", "-keyout", key, "-out", csr
        )
        _openssl(
            "x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1],
            "-set_serial", f"0x{secrets.token_hex(16)}", "-days", str(days),
            "-extfile", extfile, "-out", crt,
        )  # fmt: skip
    os.chmod(key, 0o600)
    return sdir


def ca_bundle(out: Path) -> str:
    """base64 of the CA certificate, as APIService.spec.caBundle wants it."""
    return base64.b64encode((out / CA_DIR / "ca.crt").read_bytes()).decode()


def write_cabundle_patch(out: Path) -> Path:
    """A kustomize patch that sets the APIService's caBundle (for an overlay to include)."""
    path = out / "apiservice-cabundle-patch.yaml"
    path.write_text(
        "---\n".join(
            "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\n"
            f"metadata:\n  name: {name}\nspec:\n  caBundle: {ca_bundle(out)}\n"
            for name in APISERVICES
        )
    )
    return path


def generate(opts: Options) -> list[Path]:
    """Make (or keep) the CA and the leaves; the Secret directories."""
    if opts.force:  # only what we made: OUT may hold other files
        for name in (CA_DIR, *SECRETS):
            shutil.rmtree(opts.out / name, ignore_errors=True)
    opts.out.mkdir(parents=True, exist_ok=True, mode=0o700)
    ca = ensure_ca(opts.out, days=opts.days)
    dirs = [ensure_leaf(opts.out, leaf, ca=ca, days=opts.days) for leaf in leaves(opts)]
    write_cabundle_patch(opts.out)
    return dirs


def apply(opts: Options, *, kubectl: Sequence[str]) -> None:
    """Create/update the Secrets with kubectl; patch the APIService's caBundle if present."""
    for sdir in (opts.out / s for s in SECRETS):
        manifest = subprocess.run(
            [*kubectl, "create", "secret", "generic", sdir.name, "-n", opts.namespace,
             "--type=kubernetes.io/tls", f"--from-file=tls.crt={sdir / 'tls.crt'}",
             f"--from-file=tls.key={sdir / 'tls.key'}", f"--from-file=ca.crt={sdir / 'ca.crt'}",
             "--dry-run=client", "-o", "yaml"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        subprocess.run([*kubectl, "apply", "-f", "-"], input=manifest, text=True, check=True)
    for name in APISERVICES:
        found = subprocess.run([*kubectl, "get", "apiservice", name], capture_output=True)
        if found.returncode != 0:
            print(
                f"apiservice {name} not found: apply the manifests, then run again", file=sys.stderr
            )
            continue
        patch = f'{{"spec":{{"caBundle":"{ca_bundle(opts.out)}"}}}}'
        subprocess.run(
            [*kubectl, "patch", "apiservice", name, "--type=merge", "-p", patch], check=True
        )
    patch_webhooks(kubectl, ca_bundle(opts.out))


def webhook_cabundle_patch(config: dict[str, object], bundle: str) -> list[dict[str, str]]:
    """A JSON patch setting caBundle on every webhook of a webhook configuration."""
    hooks = config.get("webhooks")
    count = len(hooks) if isinstance(hooks, list) else 0
    return [
        {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
        for i in range(count)
    ]


def patch_webhooks(kubectl: Sequence[str], bundle: str) -> None:
    """Set caBundle on the admission webhooks that exist (absent ones are skipped)."""
    for resource, name in WEBHOOK_CONFIGURATIONS:
        found = subprocess.run(
            [*kubectl, "get", resource, name, "-o", "json"], capture_output=True, text=True
        )
        if found.returncode != 0:
            print(f"{resource} {name} not found: apply the manifests, then run again",
                  file=sys.stderr)  # fmt: skip
            continue
        patch = webhook_cabundle_patch(json.loads(found.stdout), bundle)
        if patch:
            subprocess.run(
                [*kubectl, "patch", resource, name, "--type=json", "-p", json.dumps(patch)],
                check=True,
            )


def default_out() -> Path:
    """The cache directory the other scripts use (KUBEVIRT_PY_CACHE), never the repo."""
    cache = os.environ.get("KUBEVIRT_PY_CACHE") or str(Path.home() / ".cache" / "kubevirt-py")
    return Path(cache) / "certs"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gen-certs", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=default_out())
    p.add_argument("--namespace", default="kubevirt", help="namespace of the daemons")
    p.add_argument("--api-service", default="virt-api", help="Service behind the APIService")
    p.add_argument("--handler-service", default="virt-handler")
    p.add_argument("--api-san", action="append", default=[], help="extra SAN (IP:… / DNS:…)")
    p.add_argument("--handler-san", action="append", default=[], help="extra handler SAN")
    p.add_argument("--days", type=int, default=365, help="leaf validity (the CA: ten times that)")
    p.add_argument("--force", action="store_true", help="discard OUT and make everything anew")
    p.add_argument("--apply", action="store_true", help="create the Secrets, patch the caBundle")
    p.add_argument("--kubectl", default="kubectl")
    p.add_argument("--kubeconfig", help="for --apply")
    return p


def main(argv: Sequence[str] | None = None) -> None:
    ns = _parser().parse_args(argv)
    opts = Options(
        out=ns.out.resolve(),
        namespace=ns.namespace,
        api_service=ns.api_service,
        handler_service=ns.handler_service,
        extra_api_sans=tuple(ns.api_san),
        extra_handler_sans=tuple(ns.handler_san),
        days=ns.days,
        force=ns.force,
    )
    for sdir in generate(opts):
        print(f"{sdir.name}: {sdir}", file=sys.stderr)
    if ns.apply:
        kubectl = [ns.kubectl, *([f"--kubeconfig={ns.kubeconfig}"] if ns.kubeconfig else [])]
        apply(opts, kubectl=kubectl)
    print(ca_bundle(opts.out))


if __name__ == "__main__":
    main()
