"""Secrets are references: ``NAME_file`` (0600, the engine's user's own) or ``NAME_env``;
an inline secret in a ``[kafka.NAME]`` table is refused; a ``[kafka.NAME]`` table is read
with librdkafka's names and named by routes and lanes; a secret read is redacted from text."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nereus.adapters.backends.kafka.kafka_security import librdkafka_settings
from nereus.adapters.home.secrets import check_secret_file, read_secret, redact
from nereus.config import parse_config
from nereus.errors import ConfigError

SCRAM = """
[kafka.prod]
bootstrap = "b1:9094,b2:9094"
security.protocol = "SASL_SSL"
sasl.mechanism = "SCRAM-SHA-512"
sasl.username = "nereus"
sasl.password_file = "secrets/kafka"
"ssl.ca.location" = "/etc/ssl/prod-ca.pem"

[routes.default]
log = "kafka"
kafka = "prod"

[lanes.out]
destination = "kafka"
kafka = "prod"
"""


def private(path: Path, text: str, mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_kafka_table_is_named_by_routes_and_lanes_with_librdkafka_names() -> None:
    """Dotted and quoted librdkafka keys read the same; the route and lane get the
    connection's bootstrap."""
    config = parse_config(SCRAM)
    prod = config.kafka["prod"]
    assert (prod.security_protocol, prod.sasl_mechanism, prod.ssl_ca_location) == (
        "SASL_SSL", "SCRAM-SHA-512", "/etc/ssl/prod-ca.pem")
    assert config.routes["default"].bootstrap == "b1:9094,b2:9094"
    assert config.lanes["out"].bootstrap == "b1:9094,b2:9094"


LANE = '[lanes.out]\ndestination = "kafka"\nkafka = "prod"'


@pytest.mark.parametrize(("old", "new", "said"), [
    ('sasl.password_file = "secrets/kafka"', 'sasl.password = "hunter2hunter2"',
     "sasl.password = ...: a secret is not written"),
    (LANE, LANE + '\nbootstrap = "other:1"', "is not the bootstrap of the table it names (prod)"),
    (LANE, LANE.replace('"prod"', '"prd"'), "no [kafka.prd] table"),
    ('sasl.username = "nereus"', 'sasl.username = "nereus"\nsasl.password_env = "PW"',
     "sasl.password_file and sasl.password_env both"),
])
def test_bad_kafka_settings_are_refused_with_the_line_and_the_fix(old: str, new: str,
                                                                  said: str) -> None:
    """An inline password, a second bootstrap, an unknown connection, a secret given twice:
    each a ConfigError naming what to write instead (never the inline value)."""
    with pytest.raises(ConfigError) as raised:
        parse_config(SCRAM.replace(old, new), source="nereus.toml")
    assert said in raised.value.message, raised.value.message
    assert "hunter2" not in raised.value.message + (raised.value.hint or "")


def test_sasl_without_a_mechanism_or_a_password_is_refused() -> None:
    """SASL_SSL needs sasl.mechanism; SCRAM needs a user and a password reference."""
    with pytest.raises(ConfigError, match=r"needs sasl\.mechanism"):
        parse_config('[kafka.a]\nbootstrap = "x:1"\nsecurity.protocol = "SASL_SSL"\n')
    with pytest.raises(ConfigError, match=r"needs sasl\.username and sasl\.password_file"):
        parse_config('[kafka.a]\nbootstrap = "x:1"\nsecurity.protocol = "SASL_SSL"\n'
                     'sasl.mechanism = "PLAIN"\n')


def test_a_secret_file_is_read_relative_to_the_home_and_redacted(tmp_path: Path) -> None:
    """``secrets/kafka`` is the home's file; the settings carry the password read now, and
    ``redact`` removes it from any text."""
    private(tmp_path / "secrets" / "kafka", "s3cr3t-from-file\n")
    settings = librdkafka_settings(parse_config(SCRAM).kafka["prod"], tmp_path)
    assert settings["sasl.password"] == "s3cr3t-from-file"
    assert settings["security.protocol"] == "sasl_ssl"
    assert redact("auth failed for s3cr3t-from-file!") == "auth failed for ***!"


def test_a_secret_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``NAME_env`` reads the engine's environment; unset, the error names the variable."""
    monkeypatch.setenv("NEREUS_TEST_PW", "from-the-env")
    assert read_secret("x", file=None, env="NEREUS_TEST_PW") == "from-the-env"
    monkeypatch.delenv("NEREUS_TEST_PW")
    with pytest.raises(ConfigError, match="NEREUS_TEST_PW is not set"):
        read_secret("[kafka.prod] sasl.password", file=None, env="NEREUS_TEST_PW")


def test_a_secret_file_others_may_read_is_refused_with_its_mode_and_the_fix(
        tmp_path: Path) -> None:
    """Mode 0644: refused, naming the file, its mode and ``chmod 600``; nothing read."""
    path = private(tmp_path / "pw", "topsecret-value", 0o644)
    with pytest.raises(ConfigError) as raised:
        read_secret("[kafka.prod] sasl.password", file=str(path), env=None)
    assert f"{path} has mode 0644" in raised.value.message
    assert raised.value.hint == f"chmod 600 {path}"
    assert "topsecret-value" not in raised.value.message


def test_a_secret_file_of_another_user_is_refused_with_the_chown() -> None:
    """A file another uid owns is refused, naming the owner and ``chown``."""
    info = os.stat_result((0o100600, 0, 0, 1, os.geteuid() + 1, 0, 10, 0, 0, 0))
    with pytest.raises(ConfigError) as raised:
        check_secret_file("[objects] secret_access_key", Path("/x/pw"), info)
    assert "/x/pw is owned by" in raised.value.message
    assert (raised.value.hint or "").startswith("chown ")


def test_a_missing_or_empty_secret_file_says_so(tmp_path: Path) -> None:
    """No file, or an empty one: a ConfigError naming the path."""
    with pytest.raises(ConfigError, match="does not exist"):
        read_secret("x", file=str(tmp_path / "none"), env=None)
    with pytest.raises(ConfigError, match="is empty"):
        read_secret("x", file=str(private(tmp_path / "empty", "")), env=None)


def test_a_pulsar_token_over_clear_text_is_refused() -> None:
    """A token is given by reference and only over pulsar+ssl:// and https://."""
    with pytest.raises(ConfigError, match=r"travels in clear text: use pulsar\+ssl"):
        parse_config('[pulsar.a]\nservice_url = "pulsar://h:6650"\ntoken_file = "t"\n')
    with pytest.raises(ConfigError, match="a secret is not written in the file"):
        parse_config('[pulsar.a]\nservice_url = "pulsar+ssl://h:6651"\ntoken = "eyJ"\n')
    config = parse_config('[pulsar.a]\nservice_url = "pulsar+ssl://h:6651"\n'
                          'admin_url = "https://h:8443"\ntoken_env = "PULSAR_TOKEN"\n'
                          '[lanes.out]\ndestination = "pulsar"\npulsar = "a"\n')
    assert (config.lanes["out"].service_url, config.lanes["out"].admin_url) == (
        "pulsar+ssl://h:6651", "https://h:8443")


def test_the_etcd_password_is_a_reference_and_needs_its_user() -> None:
    """[cluster] password is refused inline; a user needs a password reference."""
    base = '[cluster]\ncoordinator = "etcd://h:2379/c"\nnode_id = "n"\n'
    with pytest.raises(ConfigError, match="a secret is not written in the file"):
        parse_config(base + 'username = "u"\npassword = "p"\n')
    with pytest.raises(ConfigError, match="needs both username and password_file"):
        parse_config(base + 'username = "u"\n')
    cluster = parse_config(base + 'username = "u"\npassword_env = "ETCD_PW"\n'
                           'tls_ca_file = "/ca.pem"\n').cluster
    assert cluster is not None and cluster.password_env == "ETCD_PW"


OAUTH = ('[kafka.a]\nbootstrap = "x:1"\nsecurity.protocol = "SASL_SSL"\n'
         'sasl.mechanism = "OAUTHBEARER"\n')


@pytest.mark.parametrize(("extra", "said"), [
    ("", "OAUTHBEARER needs either sasl.oauthbearer.token.endpoint.url"),
    ('enable.sasl.oauthbearer.unsecure.jwt = true\n"sasl.oauthbearer.token.endpoint.url" = '
     '"https://idp/token"\n', "not both"),
    ("enable.sasl.oauthbearer.unsecure.jwt = true\n", 'sasl.oauthbearer.config = "principal='),
])
def test_oauthbearer_needs_exactly_one_way_to_get_a_token(extra: str, said: str) -> None:
    """OAUTHBEARER with neither an OIDC endpoint nor an unsecured JWT, with both, or an
    unsecured JWT naming no principal: a ConfigError saying what to write."""
    with pytest.raises(ConfigError) as raised:
        parse_config(OAUTH + extra)
    assert said in raised.value.message + (raised.value.hint or ""), raised.value


def test_an_unsecured_jwt_passes_its_claims_to_librdkafka() -> None:
    """enable.sasl.oauthbearer.unsecure.jwt and sasl.oauthbearer.config reach librdkafka
    as written (no OIDC method is set)."""
    config = parse_config(OAUTH + "enable.sasl.oauthbearer.unsecure.jwt = true\n"
                          'sasl.oauthbearer.config = "principal=nereus scope=nereus.write"\n')
    settings = librdkafka_settings(config.kafka["a"], None)
    assert settings["enable.sasl.oauthbearer.unsecure.jwt"] == "true"
    assert settings["sasl.oauthbearer.config"] == "principal=nereus scope=nereus.write"
    assert "sasl.oauthbearer.method" not in settings


def test_oidc_passes_the_token_endpoint_and_its_ca_to_librdkafka(tmp_path: Path) -> None:
    """An OIDC table: librdkafka's oidc method, the endpoint, the client id and secret (read
    from its file) and https.ca.location (a relative path is the home's); https.ca.location
    without a token endpoint is a ConfigError naming it."""
    private(tmp_path / "idp-secret", "s3cr3t\n")
    config = parse_config(OAUTH + '"sasl.oauthbearer.token.endpoint.url" = "https://idp/t"\n'
                          '"sasl.oauthbearer.client.id" = "c"\n'
                          '"sasl.oauthbearer.client.secret_file" = "idp-secret"\n'
                          '"https.ca.location" = "idp-ca.pem"\n')
    settings = librdkafka_settings(config.kafka["a"], tmp_path)
    assert {key: settings[key] for key in (
        "sasl.oauthbearer.method", "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
        "https.ca.location")} == {
        "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": "https://idp/t",
        "sasl.oauthbearer.client.id": "c", "sasl.oauthbearer.client.secret": "s3cr3t",
        "https.ca.location": str(tmp_path / "idp-ca.pem")}
    with pytest.raises(ConfigError, match=r"https\.ca\.location is the OIDC token endpoint's CA"):
        parse_config(OAUTH + 'enable.sasl.oauthbearer.unsecure.jwt = true\n'
                     'sasl.oauthbearer.config = "principal=n"\n"https.ca.location" = "ca.pem"\n')


def test_a_tls_file_missing_unreadable_or_not_pem_is_named_with_its_setting(
        tmp_path: Path) -> None:
    """tls_file: a relative path is the home's; a file that is not there or not PEM is
    TlsFileMissing (exit 5) naming the setting and the path; a PEM file passes."""
    from nereus.adapters.home.tls_files import TlsFileMissing, tls_file
    from nereus.errors import ExitCode

    private(tmp_path / "ca.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    private(tmp_path / "junk.pem", "not a certificate")
    assert tls_file("[kafka.a] ssl.ca.location", "ca.pem", tmp_path) == str(tmp_path / "ca.pem")
    assert tls_file("[kafka.a] ssl.ca.location", None, tmp_path) is None
    for name, said in (("gone.pem", "no such file"), ("junk.pem", "is not a PEM file")):
        with pytest.raises(TlsFileMissing) as raised:
            tls_file("[kafka.a] ssl.ca.location", name, tmp_path)
        assert raised.value.exit_code == ExitCode.SERVICE_UNREACHABLE
        assert raised.value.message == f"[kafka.a] ssl.ca.location = {tmp_path / name}" + (
            ": " if said == "no such file" else " ") + said
        assert "fix [kafka.a] ssl.ca.location" in (raised.value.hint or "")


def test_doctor_warns_loudly_of_an_unsigned_oauthbearer_token(tmp_path: Path) -> None:
    """enable.sasl.oauthbearer.unsecure.jwt = true: doctor's secrets check for the table is
    a warning saying the token is unsigned and naming OIDC as the production way."""
    from nereus.cli.commands.doctor_secrets import secret_checks

    config = parse_config(OAUTH + "enable.sasl.oauthbearer.unsecure.jwt = true\n"
                          'sasl.oauthbearer.config = "principal=nereus"\n')
    (warning,) = [c for c in secret_checks(config, tmp_path) if c.name == "secrets [kafka.a]"]
    assert not warning.ok and warning.severity == "warning"
    assert "unsigned" in warning.detail and "sasl.oauthbearer.token.endpoint.url" in (
        warning.fix or "")
