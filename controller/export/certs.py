"""Each exporter's TLS: a private CA (its key discarded once used) and a serving certificate
for the export's Service names, made here with `cryptography` (EC P-256).

    make_certs(service="virt-export-x", namespace="ns", days=2) → ExportCerts(ca, cert, key)

The CA certificate is what status.links.internal.cert publishes: a client trusts it alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from shared.naming import common_name

SKEW = timedelta(minutes=5)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportCerts:
    """PEM text: the CA certificate, the serving certificate and its key."""

    ca: str
    cert: str
    key: str


def service_names(service: str, namespace: str) -> tuple[str, ...]:
    """The DNS names a client inside the cluster may use for the Service."""
    return (
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        f"{service}.{namespace}",
        service,
    )


def make_certs(*, service: str, namespace: str, valid: timedelta) -> ExportCerts:
    """A fresh CA and a serving certificate for the Service, valid for `valid`."""
    now = datetime.now(UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cn = common_name(f"export-ca.{namespace}")
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_cn)])
    ca = (
        _builder(ca_name, ca_name, ca_key.public_key(), now=now, valid=valid)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(cert_sign=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = service_names(service, namespace)
    # CN ≤ 64 characters (RFC 5280): the Service's name; the DNS names are in the SAN
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name(service))])
    cert = (
        _builder(subject, ca_name, key.public_key(), now=now, valid=valid)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return ExportCerts(ca=_pem(ca), cert=_pem(cert), key=key_pem.decode())


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public: ec.EllipticCurvePublicKey,
    *,
    now: datetime,
    valid: timedelta,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - SKEW)
        .not_valid_after(now + valid)
    )


def _usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()
