"""Certificates a secured server must refuse, made in a test with ``cryptography``: a client
certificate signed by the scripts' test CA that expired yesterday, and a CA of the test's
own (untrusted by every server) with a client certificate it signed. Written 0600, as a
home's secrets must be."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True, slots=True)
class ClientMaterial:
    """A client certificate and its key (PEM files), and the CA that signed it."""

    certificate: Path
    key: Path
    ca: Path


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def _name(common_name: str | None) -> x509.Name:
    # etcd 3.4's gateway refuses a client certificate with a CommonName: O only then
    if common_name is None:
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "nereus")])
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _sign(subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
          issuer_key: ec.EllipticCurvePrivateKey | object, *, ca: bool,
          not_after: datetime.datetime) -> x509.Certificate:
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(not_after - 30 * _DAY).not_valid_after(not_after)
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())  # type: ignore[arg-type]


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def client_certificate(directory: Path, name: str, *, signer_certs: Path | None = None,
                       expired: bool = False, common_name: str | None = "nereus-client",
                       ) -> ClientMaterial:
    """``name``.pem/.key in ``directory``: signed by the CA of ``signer_certs`` (the
    scripts' certificate directory: ca.pem and ca.key) or, without it, by a CA made here
    (``name``-ca.pem, trusted by no server); valid until yesterday if ``expired``."""
    now = datetime.datetime.now(datetime.UTC)
    if signer_certs is not None:
        ca_cert = x509.load_pem_x509_certificate((signer_certs / "ca.pem").read_bytes())
        ca_key = serialization.load_pem_private_key((signer_certs / "ca.key").read_bytes(),
                                                    password=None)
        ca_path = signer_certs / "ca.pem"
    else:
        own_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = _sign(_name(f"{name}-untrusted-ca"), own_key, _name(f"{name}-untrusted-ca"),
                        own_key, ca=True, not_after=now + 30 * _DAY)
        ca_key = own_key
        ca_path = _write(directory / f"{name}-ca.pem", ca_cert.public_bytes(
            serialization.Encoding.PEM))
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = _sign(_name(common_name), key, ca_cert.subject, ca_key, ca=False,
                        not_after=now - _DAY if expired else now + 30 * _DAY)
    return ClientMaterial(
        certificate=_write(directory / f"{name}.pem",
                           certificate.public_bytes(serialization.Encoding.PEM)),
        key=_write(directory / f"{name}.key", _pem_key(key)), ca=ca_path)


def untrusted_ca(directory: Path, name: str = "other-ca") -> Path:
    """A CA of this test's own, signing nothing any server shows: trusting only it, a
    client finds every server's certificate untrusted."""
    return client_certificate(directory, name).ca
