"""A local certificate authority and a server certificate for a laptop (`make run TLS=1`): the
Terraform CLI speaks only HTTPS to a cloud host. Made once under the data dir and kept; the CA
is handed to the CLI (and to local executors) in a bundle with the usual public authorities, so
that `terraform init` still reaches the public registry."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import certifi
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 825  # the longest a server certificate may be valid for clients that check


@dataclass(frozen=True)
class LocalTls:
    ca_cert: Path
    cert: Path
    key: Path
    bundle: Path  # the public authorities and this CA: what SSL_CERT_FILE names


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _general_name(hostname: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(hostname))
    except ValueError:
        return x509.DNSName(hostname)


def make_local_tls(
    directory: Path, hostnames: tuple[str, ...] = ("localhost",), days: int = VALID_DAYS
) -> LocalTls:
    """A new CA and a certificate for `hostnames` (and 127.0.0.1), written to `directory`. A
    hostname that is an IP address is named as one (an IP SAN): clients check an address
    against those, never against DNS names."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("Firstlume local CA"))
        .issuer_name(_name("Firstlume local CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [_general_name(h) for h in hostnames]
    if x509.IPAddress(ipaddress.ip_address("127.0.0.1")) not in names:
        names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hostnames[0]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    tls = paths(directory)
    tls.bundle.parent.mkdir(parents=True, exist_ok=True)
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    tls.ca_cert.write_bytes(ca_pem)
    tls.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    tls.key.touch(mode=0o600)
    tls.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    tls.bundle.write_bytes(Path(certifi.where()).read_bytes().rstrip(b"\n") + b"\n" + ca_pem)
    return tls


PUBLIC = "public"


def paths(directory: Path) -> LocalTls:
    """The private key stays in `directory` (hidden from local executors with the data dir); the
    certificates are in its `public` folder, which executors see (they trust the bundle)."""
    public = directory / PUBLIC
    return LocalTls(
        public / "ca.pem", public / "server.pem", directory / "server-key.pem", public / "ca-bundle.pem"
    )


def ensure_local_tls(directory: Path) -> LocalTls:
    """The kept CA and certificate, made the first time."""
    tls = paths(directory)
    if all(p.exists() for p in (tls.ca_cert, tls.cert, tls.key, tls.bundle)):
        return tls
    return make_local_tls(directory)
