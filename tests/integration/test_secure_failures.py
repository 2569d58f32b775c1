"""Each secured connection refused as an operator meets it: a wrong password or token, an
expired client certificate, a client certificate from a CA the server does not trust, a CA
that does not sign the server's certificate, and a CA file that is not there. For Kafka,
Pulsar, etcd and S3 each is a ``nereus --json`` command on a fresh home that exits 5 within
seconds with an error naming the connection and a hint naming the setting to fix, never a
hang or a traceback, and never the secret. The certificates are made in the test
(``throwaway_certs``): the expired one signed by the scripts' own CA (named with its dates
before any connection), the untrusted ones by a CA of the test's own. An expired *server*
certificate is shown by a TLS listener of the test's own (no secured server here has one),
for all four clients.

The cases of one server run side by side (each is a process of its own) to keep the suite's
time down. Covered elsewhere: a wrong Kafka password (``test_secret_leaks.py``, as here), a
missing client certificate (``test_kafka_secure.py``), no CA given (``test_kafka_secure``,
``test_pulsar_secure``, ``test_etcd_secure``, ``test_s3_secure``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import CliResult, run_nereus
from tests.integration.secure_services import (
    SecureEtcd,
    SecureKafka,
    SecurePulsar,
    SecureS3,
    schedule_acknowledged,
)
from tests.integration.throwaway_certs import client_certificate, untrusted_ca

WRONG = f"wrong-{uuid.uuid4().hex}"  # every wrong password, token or key given here
FORGED_TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJuZXJldXMifQ.Zm9yZ2VkLXNpZ25hdHVyZQ"


@dataclass(frozen=True, slots=True)
class Case:
    """One refusal: the home's connection table, and what the error and hint must say."""

    name: str
    table: str
    said: str  # in the error (case-insensitive)
    fix: str  # in the hint
    command: tuple[str, ...] = ()  # its own command, else the one all cases run


def private(home: Path, name: str, text: str) -> Path:
    """A 0600 file of the home's secrets/ holding ``text``."""
    path = home / "secrets" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


def copied(certs: Path, home: Path, name: str) -> Path:
    """The scripts' certificate file ``name``, copied 0600 into the home's secrets/."""
    return private(home, name, (certs / name).read_text().strip())


def refused(cases: list[Case], tmp_path: Path, rest: str, *command: str,
            secrets: tuple[str, ...] = ()) -> None:
    """Each case's home (its table plus ``rest``) runs ``nereus --json COMMAND`` (side by
    side); each exits 5 within 60 s with an error document saying ``said`` and a hint
    saying ``fix``, no traceback, none of ``secrets``."""
    def run(case: Case) -> CliResult:
        home = tmp_path / case.name
        (home / "nereus.toml").write_text(case.table + rest)
        home.chmod(0o700)
        return run_nereus("--json", *(case.command or command), home=home, timeout=60)

    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(run, cases))
    for case, result in zip(cases, results, strict=True):
        assert result.code == 5, (case.name, result.code, result.stdout, result.stderr)
        document = result.json()
        assert case.said.lower() in document["error"].lower(), (case.name, document)
        assert case.fix in (document["hint"] or ""), (case.name, document)
        assert "Traceback" not in result.stdout + result.stderr, case.name
        for secret in (WRONG, *secrets):
            assert secret not in result.stdout + result.stderr, case.name


def homes(tmp_path: Path, names: list[str]) -> dict[str, Path]:
    """A fresh home directory (with secrets/) per case."""
    made = {name: tmp_path / name for name in names}
    for home in made.values():
        (home / "secrets").mkdir(parents=True, mode=0o700)
    return made


def certificate_cases(tmp_path: Path, certs: Path, names: tuple[str, str, str, str],
                      table: Callable[[Path, Path | None, Path | None, Path | None], str],
                      *, common_name: str | None = "nereus-client",
                      ) -> tuple[Case, Case, Case, Case]:
    """The four certificate cases (expired client certificate, untrusted client
    certificate, untrusted server, missing CA file), their ``said`` left to the caller:
    ``table(home, ca, certificate, key)`` writes the connection (None: the usual file)."""
    expired, stranger, server, missing = homes(tmp_path, list(names)).values()
    old = client_certificate(expired / "secrets", "expired", signer_certs=certs, expired=True,
                             common_name=common_name)
    other = client_certificate(stranger / "secrets", "stranger", common_name=common_name)
    return (Case(names[0], table(expired, None, old.certificate, old.key), "", ""),
            Case(names[1], table(stranger, None, other.certificate, other.key), "", ""),
            Case(names[2], table(server, untrusted_ca(server / "secrets"), None, None), "", ""),
            Case(names[3], table(missing, missing / "secrets" / "no-such-ca.pem", None, None),
                 "", ""))


def said(case: Case, error: str, hint: str) -> Case:
    return Case(case.name, case.table, error, hint, case.command)


@pytest.mark.kafka
def test_kafka_refusals_name_the_connection_and_exit_5(tmp_path: Path,
                                                       kafka_secure: SecureKafka) -> None:
    """Against the secured broker, ``message schedule`` on a Kafka route: an expired or
    untrusted client certificate (mTLS listener), a CA that did not sign the broker's
    certificate and a CA file that is not there, a token without the scope the broker
    requires (OAUTHBEARER), a wrong OIDC client secret (the test issuer's token endpoint
    refuses it) and a wrong password (SCRAM) each exit 5 naming [kafka.secure]."""
    def table(home: Path, ca: Path | None, cert: Path | None, key: Path | None) -> str:
        trusted = ca or copied(kafka_secure.certs, home, "ca.pem")
        lines = ["[kafka.secure]", f'ssl.ca.location = "{trusted}"', 'security.protocol = "SSL"']
        if cert is not None:
            return "\n".join([*lines, f'bootstrap = "{kafka_secure.mtls}"',
                              f'ssl.certificate.location = "{cert}"',
                              f'ssl.key.location = "{key}"']) + "\n"
        return "\n".join([*lines, f'bootstrap = "{kafka_secure.tls}"']) + "\n"

    expired, stranger, server, missing = certificate_cases(
        tmp_path, kafka_secure.certs, ("expired", "stranger", "server", "missing"), table)
    oauth, scram, oidc = homes(tmp_path, ["oauth", "scram", "oidc"]).values()
    ca = {home: copied(kafka_secure.certs, home, "ca.pem") for home in (oauth, scram, oidc)}
    password = private(scram, "kafka-password", WRONG)
    client_secret = private(oidc, "oidc-secret", WRONG)
    cases = [
        said(expired, "expired at", "point [kafka.secure] ssl.certificate.location at"),
        said(stranger, "alert bad certificate", "ssl.certificate.location"),
        said(server, "broker's certificate: unable to get local issuer", "ssl.ca.location"),
        said(missing, "[kafka.secure] ssl.ca.location = ", "fix [kafka.secure] ssl.ca.location"),
        Case("oauth", f'[kafka.secure]\nbootstrap = "{kafka_secure.oauth}"\n'
             f'security.protocol = "SASL_SSL"\nssl.ca.location = "{ca[oauth]}"\n'
             'sasl.mechanism = "OAUTHBEARER"\nenable.sasl.oauthbearer.unsecure.jwt = true\n'
             'sasl.oauthbearer.config = "principal=nereus scope=nereus.read"\n',
             "insufficient_scope", "sasl.oauthbearer.config"),
        Case("oidc", f'[kafka.secure]\nbootstrap = "{kafka_secure.oidc}"\n'
             f'security.protocol = "SASL_SSL"\nssl.ca.location = "{ca[oidc]}"\n'
             f'https.ca.location = "{ca[oidc]}"\nsasl.mechanism = "OAUTHBEARER"\n'
             f'sasl.oauthbearer.token.endpoint.url = "{kafka_secure.oidc_token_url}"\n'
             f'sasl.oauthbearer.client.id = "{kafka_secure.user}"\n'
             f'sasl.oauthbearer.client.secret_file = "{client_secret}"\n',
             "invalid_client", "sasl.oauthbearer.client.secret_file"),
        Case("scram", f'[kafka.secure]\nbootstrap = "{kafka_secure.sasl}"\n'
             f'security.protocol = "SASL_SSL"\nssl.ca.location = "{ca[scram]}"\n'
             'sasl.mechanism = "SCRAM-SHA-512"\nsasl.username = "nereus"\n'
             f'sasl.password_file = "{password}"\n', "authentication", "sasl.username"),
    ]
    run = uuid.uuid4().hex[:8]
    rest = (f'\n[routes.default]\nlog = "kafka"\nkafka = "secure"\n'
            f'topic = "nereus-refused-{run}-log"\n\n[lanes.out]\ndestination = "kafka"\n'
            f'kafka = "secure"\ntopic = "nereus-refused-{run}"\n')
    refused(cases, tmp_path, rest, "message", "schedule", "--lane", "out", "--delay", "1m",
            "--payload", "x")


@pytest.mark.pulsar
def test_pulsar_refusals_name_the_connection_and_exit_5(tmp_path: Path,
                                                        pulsar_secure: SecurePulsar) -> None:
    """Against the secured standalone, ``message schedule`` on a Pulsar route: an expired or
    untrusted client certificate, a CA that did not sign the broker's certificate, a CA
    file that is not there and a forged token each exit 5 naming [pulsar.secure]."""
    def table(home: Path, ca: Path | None, cert: Path | None, key: Path | None) -> str:
        trusted = ca or copied(pulsar_secure.certs, home, "ca.pem")
        lines = ["[pulsar.secure]", f'service_url = "{pulsar_secure.service_url}"',
                 f'admin_url = "{pulsar_secure.admin_url}"',
                 f'tls_trust_certs_file_path = "{trusted}"']
        if cert is not None:
            lines += [f'tls_certificate_file_path = "{cert}"',
                      f'tls_private_key_file_path = "{key}"']
        else:
            lines.append(f'token_file = "{private(home, "token", pulsar_secure.token)}"')
        return "\n".join(lines) + "\n"

    expired, stranger, server, missing = certificate_cases(
        tmp_path, pulsar_secure.certs, ("expired", "stranger", "server", "missing"), table)
    (forged,) = homes(tmp_path, ["forged"]).values()
    forged_table = table(forged, None, None, None)
    private(forged, "token", FORGED_TOKEN)
    cases = [
        said(expired, "expired at", "tls_certificate_file_path at a certificate valid now"),
        said(stranger, "failed TLS", "tls_certificate_file_path"),
        said(server, "CERTIFICATE_VERIFY_FAILED", "tls_trust_certs_file_path"),
        said(missing, "[pulsar.secure] tls_trust_certs_file_path = ",
             "fix [pulsar.secure] tls_trust_certs_file_path"),
        Case("forged", forged_table, "401 Unauthorized", "[pulsar.secure]"),
    ]
    run = uuid.uuid4().hex[:8]
    rest = (f'\n[routes.default]\nlog = "pulsar"\npulsar = "secure"\n'
            f'topic = "nereus-refused-{run}-log"\n\n[lanes.out]\ndestination = "pulsar"\n'
            f'pulsar = "secure"\ntopic = "nereus-refused-{run}"\n')
    refused(cases, tmp_path, rest, "message", "schedule", "--lane", "out", "--delay", "1m",
            "--payload", "x", secrets=(FORGED_TOKEN, pulsar_secure.token))


@pytest.mark.etcd
def test_etcd_refusals_name_the_setting_and_exit_5(tmp_path: Path,
                                                   etcd_secure: SecureEtcd) -> None:
    """Against the secured etcd, ``cluster status`` from a node's home: an expired or
    untrusted client certificate, a CA that did not sign etcd's certificate, a CA file that
    is not there and a wrong password each exit 5 naming the [cluster] setting to check."""
    certs = etcd_secure.certs

    def table(home: Path, ca: Path | None, cert: Path | None, key: Path | None,
              password: str | None = None) -> str:
        secret = private(home, "etcd-password", password or
                         (certs / "etcd-password").read_text().strip())
        return (f'[cluster]\ncoordinator = "etcd://{etcd_secure.host}:{etcd_secure.port}/'
                f'refused-{uuid.uuid4().hex[:8]}"\nnode_id = "n1"\n'
                f'tls_ca_file = "{ca or copied(certs, home, "ca.pem")}"\n'
                f'tls_cert_file = "{cert or copied(certs, home, "etcd-client.pem")}"\n'
                f'tls_key_file = "{key or copied(certs, home, "etcd-client.key")}"\n'
                f'username = "{etcd_secure.user}"\npassword_file = "{secret}"\n')

    # etcd 3.4's gateway refuses a client certificate with a CommonName: none here
    expired, stranger, server, missing = certificate_cases(
        tmp_path, certs, ("expired", "stranger", "server", "missing"), table, common_name=None)
    (wrong,) = homes(tmp_path, ["wrong"]).values()
    cases = [
        said(expired, "expired at", "point [cluster] tls_cert_file at"),
        said(stranger, "SSL", "tls_cert_file"),
        said(server, "CERTIFICATE_VERIFY_FAILED", "tls_ca_file"),
        said(missing, "no-such-ca.pem", "tls_ca_file"),
        Case("wrong", table(wrong, None, None, None, password=WRONG), "authentication failed",
             "password_file"),
    ]
    refused(cases, tmp_path, "", "cluster", "status")


@pytest.mark.s3
def test_s3_refusals_name_the_setting_and_exit_5(tmp_path: Path, s3_secure: SecureS3) -> None:
    """Against S3 over https, ``checkpoint list``: a CA that did not sign the endpoint's
    certificate, a CA file that is not there and a wrong secret key each exit 5 naming the
    [objects] setting to check (S3 takes no client certificate)."""
    def table(home: Path, ca: Path | None, secret: str | None = None) -> str:
        key = private(home, "s3-secret", secret or s3_secure.secret_access_key)
        return (f'[routes.default]\nlog = "file"\n\n[objects]\nstore = "s3"\n'
                f'bucket = "nereus-refused"\nendpoint = "{s3_secure.endpoint}"\n'
                f'access_key_id = "{s3_secure.access_key_id}"\n'
                f'secret_access_key_file = "{key}"\nca_bundle = "{ca}"\n')

    server, missing, wrong = homes(tmp_path, ["server", "missing", "wrong"]).values()
    cases = [
        Case("server", table(server, untrusted_ca(server / "secrets")),
             "CERTIFICATE_VERIFY_FAILED", "ca_bundle"),
        Case("missing", table(missing, missing / "secrets" / "no-such-ca.pem"),
             "[objects] ca_bundle = ", "fix [objects] ca_bundle"),
        Case("wrong", table(wrong, copied(s3_secure.certs, wrong, "ca.pem"), secret=WRONG),
             "SignatureDoesNotMatch", "secret_access_key_file"),
    ]
    refused(cases, tmp_path, "", "checkpoint", "list", "default/0",
            secrets=(s3_secure.secret_access_key,))


def test_an_expired_server_certificate_is_refused_by_every_client(tmp_path: Path) -> None:
    """A server whose certificate (from the CA the home trusts) expired yesterday, played
    by a TLS listener of the test: ``message schedule`` to a Kafka or Pulsar route,
    ``cluster status`` to etcd and ``checkpoint list`` from S3 each exit 5 within seconds,
    naming the connection, the setting to check and "certificate has expired" (for Kafka
    asked of Python's TLS: librdkafka says only "certificate verify failed")."""
    from tests.integration.throwaway_certs import expired_server

    with expired_server(tmp_path) as (port, ca):
        route = ('\n[routes.default]\nlog = "{0}"\n{0} = "old"\ntopic = "t-log"\n'
                 '\n[lanes.out]\ndestination = "{0}"\n{0} = "old"\ntopic = "t"\n')
        schedule = ("message", "schedule", "--lane", "out", "--delay", "1m", "--payload", "x")
        cases = [
            Case("kafka", f'[kafka.old]\nbootstrap = "127.0.0.1:{port}"\n'
                 f'security.protocol = "SSL"\nssl.ca.location = "{ca}"\n' +
                 route.format("kafka"), "the broker's certificate: certificate has expired",
                 "have not expired", schedule),
            Case("pulsar", f'[pulsar.old]\nservice_url = "pulsar+ssl://127.0.0.1:{port}"\n'
                 f'admin_url = "https://127.0.0.1:{port}"\ntls_trust_certs_file_path = '
                 f'"{ca}"\ntoken_file = "secrets/token"\n' + route.format("pulsar"),
                 "certificate has expired", "[pulsar.old]", schedule),
            Case("etcd", f'[cluster]\ncoordinator = "etcd://127.0.0.1:{port}/old"\n'
                 f'node_id = "n1"\ntls_ca_file = "{ca}"\nusername = "nereus"\n'
                 'password_file = "secrets/token"\n', "certificate has expired",
                 "tls_ca_file", ("cluster", "status")),
            Case("s3", f'[routes.default]\nlog = "file"\n\n[objects]\nstore = "s3"\n'
                 f'bucket = "old"\nendpoint = "https://127.0.0.1:{port}"\n'
                 f'access_key_id = "nereus"\nsecret_access_key_file = "secrets/token"\n'
                 f'ca_bundle = "{ca}"\n', "certificate has expired", "ca_bundle",
                 ("checkpoint", "list", "default/0")),
        ]
        for case in cases:
            private(tmp_path / case.name, "token", WRONG)
        refused(cases, tmp_path, "")


@pytest.mark.pulsar
def test_nothing_acknowledged_is_lost_while_a_pulsar_token_is_fixed(
        tmp_path: Path, pulsar_secure: SecurePulsar) -> None:
    """A Pulsar lane whose token the broker refuses (pulsar-client says only "timeout"):
    messages are acknowledged (the Shard Log is the home's file log), the lane is NOT READY
    naming [pulsar.secure] and the admin API's 401 for the same token, nothing publishes;
    the token file is fixed and the engine restarted: every message publishes. The forged
    token shows nowhere."""
    from tests.daemon import running_engine
    from tests.polling import wait_until

    home = tmp_path / "home"
    ca = copied(pulsar_secure.certs, home, "ca.pem")
    token = private(home, "token", FORGED_TOKEN)
    (home / "nereus.toml").write_text(
        f'[pulsar.secure]\nservice_url = "{pulsar_secure.service_url}"\n'
        f'admin_url = "{pulsar_secure.admin_url}"\ntls_trust_certs_file_path = "{ca}"\n'
        f'token_file = "{token}"\n\n[routes.default]\nlog = "file"\n\n[lanes.out]\n'
        f'destination = "pulsar"\npulsar = "secure"\n'
        f'topic = "nereus-fixed-{uuid.uuid4().hex[:8]}"\n')
    home.chmod(0o700)
    said: list[str] = []
    with running_engine(home):
        ids = schedule_acknowledged(home, "out", 3)

        def refused_lane() -> str | None:
            lanes = run_nereus("--json", "lane", "list", home=home)
            said.append(lanes.stdout + lanes.stderr)
            reason = next(x for x in lanes.json() if x["lane"] == "out")["not_ready_reason"]
            return reason if "[pulsar.secure]" in (reason or "") and \
                "401 Unauthorized" in reason else None

        wait_until("the lane to say the broker refused [pulsar.secure]", refused_lane, 60,
                   interval_s=0.5)
        states = {run_nereus("--json", "message", "show", mid, home=home).json()["state"]
                  for mid in ids}
        assert "PUBLISHED" not in states, states
    token.write_text(pulsar_secure.token + "\n")
    with running_engine(home):
        def published() -> bool:
            return all(run_nereus("--json", "message", "show", mid, home=home).json()["state"]
                       == "PUBLISHED" for mid in ids)

        wait_until("every message to publish once the token is fixed", published, 60,
                   interval_s=0.5)
    assert not any(FORGED_TOKEN in text for text in said)
