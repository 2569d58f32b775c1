"""Certificates a secured connection must refuse, made in a test with ``cryptography``: a
client certificate signed by the scripts' test CA that expired yesterday, a CA of the
test's own (untrusted by every server) with a client certificate it signed, and a server
certificate for 127.0.0.1 that expired yesterday, from a CA the client is given
(``expired_server`` serves it: the client must refuse it for its date alone). Written 0600,
as a home's secrets must be."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
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
          not_after: datetime.datetime, server: bool = False) -> x509.Certificate:
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(not_after - 30 * _DAY).not_valid_after(not_after)
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.IPv4Address("127.0.0.1"))]), critical=False).add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    elif not ca:
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
        ca_cert, ca_key, ca_path = _own_ca(directory, f"{name}-ca")
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = _sign(_name(common_name), key, ca_cert.subject, ca_key, ca=False,
                        not_after=now - _DAY if expired else now + 30 * _DAY)
    return ClientMaterial(
        certificate=_write(directory / f"{name}.pem",
                           certificate.public_bytes(serialization.Encoding.PEM)),
        key=_write(directory / f"{name}.key", _pem_key(key)), ca=ca_path)


def _own_ca(directory: Path, name: str
            ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey, Path]:
    """A CA made here: its certificate, key and PEM file ``name``.pem in ``directory``."""
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = _sign(_name(name), key, _name(name), key, ca=True,
                        not_after=datetime.datetime.now(datetime.UTC) + 30 * _DAY)
    return certificate, key, _write(directory / f"{name}.pem",
                                    certificate.public_bytes(serialization.Encoding.PEM))


def untrusted_ca(directory: Path, name: str = "other-ca") -> Path:
    """A CA of this test's own, signing nothing any server shows: trusting only it, a
    client finds every server's certificate untrusted."""
    return client_certificate(directory, name).ca


@contextmanager
def expired_server(directory: Path) -> Iterator[tuple[int, Path]]:
    """A TLS server on 127.0.0.1 (its port yielded, with the CA file to trust) showing a
    certificate for 127.0.0.1 from that CA that expired yesterday; it speaks nothing after
    the handshake, which every client that checks dates refuses. Stopped on exit."""
    ca_cert, ca_key, ca_path = _own_ca(directory, "expired-server-ca")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    certificate = _sign(_name("127.0.0.1"), key, ca_cert.subject, ca_key, ca=False,
                        not_after=now - _DAY, server=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(
        _write(directory / "expired-server.pem",
               certificate.public_bytes(serialization.Encoding.PEM)),
        _write(directory / "expired-server.key", _pem_key(key)))
    listener = socket.create_server(("127.0.0.1", 0))
    stopping = threading.Event()

    def handshake(connection: socket.socket) -> None:
        with connection, suppress(OSError):  # the client aborts: that is the point
            connection.settimeout(10)
            context.wrap_socket(connection, server_side=True).close()

    def serve() -> None:
        while not stopping.is_set():
            with suppress(OSError):
                connection, _ = listener.accept()
                threading.Thread(target=handshake, args=(connection,), daemon=True).start()

    listener.settimeout(0.2)
    thread = threading.Thread(target=serve, name="expired-tls-server", daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], ca_path
    finally:
        stopping.set()
        thread.join(5)
        listener.close()
