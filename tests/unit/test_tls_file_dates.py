"""A TLS file out of its dates is named before any connection (``tls_files.tls_file``): a
client certificate that expired or is not valid yet, a CA file none of whose certificates
is valid now; a CA bundle with one valid certificate among expired ones, and a key, pass."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from nereus.adapters.home.tls_files import TlsFileMissing, tls_file

NOW = datetime.datetime.now(datetime.UTC)
DAY = datetime.timedelta(days=1)


def pem(name: str, not_before: datetime.datetime, not_after: datetime.datetime) -> bytes:
    """A self-signed certificate of ``name`` valid from ``not_before`` to ``not_after``."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    certificate = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(not_before).not_valid_after(not_after)
                   .sign(key, hashes.SHA256()))
    return certificate.public_bytes(serialization.Encoding.PEM)


def written(tmp_path: Path, name: str, *parts: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(b"".join(parts))
    return str(path)


def test_an_expired_client_certificate_is_named_with_its_setting(tmp_path: Path) -> None:
    """Exit 5's error names the setting, the file, the subject and when it expired; the
    hint says to renew it."""
    path = written(tmp_path, "client.pem", pem("old-client", NOW - 30 * DAY, NOW - DAY))
    with pytest.raises(TlsFileMissing) as refused:
        tls_file("[kafka.prod] ssl.certificate.location", path, None, holds="certificate")
    said = refused.value.message
    assert said.startswith(f"[kafka.prod] ssl.certificate.location = {path}: ")
    assert "CN=old-client" in said and "expired at" in said
    assert refused.value.exit_code == 5 and "renew it" in (refused.value.hint or "")


def test_a_certificate_not_valid_yet_asks_about_the_clock(tmp_path: Path) -> None:
    """A client certificate whose dates begin tomorrow is refused, asking whether this
    host's clock is right."""
    path = written(tmp_path, "client.pem", pem("early", NOW + DAY, NOW + 30 * DAY))
    with pytest.raises(TlsFileMissing, match=r"not valid before .* this host's clock"):
        tls_file("[cluster] tls_cert_file", path, None, holds="certificate")


def test_a_ca_file_needs_one_certificate_valid_now(tmp_path: Path) -> None:
    """A bundle of an expired and a valid CA passes; a bundle of two expired ones does
    not; a valid certificate file passes, and a key file is not read for dates."""
    old = pem("old-ca", NOW - 30 * DAY, NOW - DAY)
    good = pem("good-ca", NOW - DAY, NOW + 30 * DAY)
    mixed = written(tmp_path, "mixed.pem", old, good)
    assert tls_file("[objects] ca_bundle", mixed, None) == mixed
    stale = written(tmp_path, "stale.pem", old, pem("older-ca", NOW - 60 * DAY, NOW - DAY))
    with pytest.raises(TlsFileMissing, match="none of its 2 certificates is valid now"):
        tls_file("[objects] ca_bundle", stale, None)
    fine = written(tmp_path, "fine.pem", good)
    assert tls_file("[cluster] tls_cert_file", fine, None, holds="certificate") == fine
    key = written(tmp_path, "client.key", b"-----BEGIN PRIVATE KEY-----\nnot read\n")
    assert tls_file("[cluster] tls_key_file", key, None, holds="key") == key


def test_doctor_warns_ahead_of_a_certificates_expiry(tmp_path: Path) -> None:
    """doctor's tls checks: a client certificate expiring in 3 days is a warning saying
    when; one valid for 60 days is ok; an expired CA fails naming its dates; each check
    names its table and setting."""
    from nereus.cli.commands.doctor_certificates import WARN_DAYS, certificate_checks
    from nereus.config import parse_config

    soon = written(tmp_path, "soon.pem", pem("soon", NOW - DAY, NOW + 3 * DAY))
    fine = written(tmp_path, "fine.pem", pem("fine", NOW - DAY, NOW + 60 * DAY))
    old = written(tmp_path, "old-ca.pem", pem("old-ca", NOW - 30 * DAY, NOW - DAY))
    config = parse_config(
        '[kafka.prod]\nbootstrap = "127.0.0.1:9093"\nsecurity.protocol = "SSL"\n'
        f'ssl.ca.location = "{fine}"\nssl.certificate.location = "{soon}"\n'
        f'ssl.key.location = "{soon}"\n'
        f'[pulsar.events]\nservice_url = "pulsar+ssl://127.0.0.1:6651"\n'
        f'admin_url = "https://127.0.0.1:8443"\ntls_trust_certs_file_path = "{old}"\n')
    found = {c.name: c for c in certificate_checks(config, tmp_path, NOW)}
    assert set(found) == {"tls [kafka.prod] ssl.ca.location",
                          "tls [kafka.prod] ssl.certificate.location",
                          "tls [pulsar.events] tls_trust_certs_file_path"}
    warned = found["tls [kafka.prod] ssl.certificate.location"]
    assert not warned.ok and warned.severity == "warning"
    assert "expires at" in warned.detail and "in 2 day(s)" in warned.detail
    assert f"{WARN_DAYS} days" in (warned.fix or "")
    assert found["tls [kafka.prod] ssl.ca.location"].ok
    failed = found["tls [pulsar.events] tls_trust_certs_file_path"]
    assert not failed.ok and failed.severity == "error" and "expired at" in failed.detail
