"""No secret leaves the engine: a whole run over SASL_SSL (SCRAM-SHA-512) against the real
secured Kafka, Shard Log and destination both, and to a Pulsar lane over pulsar+ssl:// with
a token, driven as an operator drives it; every output of the run (each command's stdout
and stderr, --json or not, doctor, status, metrics, the engine's logs, every screen of the
dashboard, every file the home holds but the secrets themselves) is searched for the
password and the token, and neither is in any. A wrong password fails doctor and the CLI
(exit 5) naming the connection and what to fix, again without showing the password; the
dashboard shows the lane's NOT READY reason without it."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.conftest import CliResult, run_nereus
from tests.daemon import running_engine
from tests.integration.secure_services import SecureKafka, SecurePulsar, schedule_acknowledged
from tests.polling import wait_until
from tests.tui.screen_text import tour_home

pytestmark = [pytest.mark.kafka, pytest.mark.pulsar]


def secured_home(home: Path, kafka: SecureKafka, password: str) -> None:
    """A home whose route and lane speak SCRAM over TLS; the password in a 0600 file."""
    secrets = home / "secrets"
    secrets.mkdir(parents=True, mode=0o700)
    (secrets / "kafka-password").write_text(password + "\n")
    (secrets / "kafka-password").chmod(0o600)
    ca = kafka.private_copy(secrets, "ca.pem")
    run = uuid.uuid4().hex[:8]
    (home / "nereus.toml").write_text(f"""
[kafka.secure]
bootstrap = "{kafka.sasl}"
security.protocol = "SASL_SSL"
sasl.mechanism = "SCRAM-SHA-512"
sasl.username = "{kafka.user}"
sasl.password_file = "secrets/kafka-password"
ssl.ca.location = "{ca}"

[routes.default]
log = "kafka"
kafka = "secure"
topic = "nereus-leak-{run}-commands"

[lanes.out]
destination = "kafka"
kafka = "secure"
topic = "nereus-leak-{run}-out"
""")
    home.chmod(0o700)


def with_pulsar_lane(home: Path, pulsar: SecurePulsar) -> None:
    """Add lane ``pout``: Pulsar over pulsar+ssl:// with the token in a 0600 file."""
    token = home / "secrets" / "pulsar-token"
    token.write_text(pulsar.token + "\n")
    token.chmod(0o600)
    ca = pulsar.private_copy(home / "secrets", "ca.pem")
    with (home / "nereus.toml").open("a") as toml:
        toml.write(f"""
[pulsar.secure]
service_url = "{pulsar.service_url}"
admin_url = "{pulsar.admin_url}"
tls_trust_certs_file_path = "{ca}"
token_file = "secrets/pulsar-token"

[lanes.pout]
destination = "pulsar"
pulsar = "secure"
topic = "nereus-leak-{uuid.uuid4().hex[:8]}"
""")


def everything_in(home: Path) -> bytes:
    """Every byte of every file of the home but the secret files themselves."""
    return b"\n".join(path.read_bytes() for path in sorted(home.rglob("*"))
                      if path.is_file() and path.name not in ("kafka-password", "pulsar-token"))


def test_a_whole_run_over_scram_shows_the_password_nowhere(
        tmp_path: Path, kafka_secure: SecureKafka, pulsar_secure: SecurePulsar) -> None:
    """Engine up, a message scheduled, published over SASL_SSL, looked at every way an
    operator looks (the dashboard's every screen too), engine down: the password is in no
    output and no file of the home; doctor reads the secret's file and warns that the
    lane's topic has one replica."""
    home = tmp_path / "home"
    password = kafka_secure.password
    secured_home(home, kafka_secure, password)
    with_pulsar_lane(home, pulsar_secure)
    outputs: list[CliResult] = []

    def nereus(*args: str) -> CliResult:
        result = run_nereus(*args, home=home, timeout=90)
        outputs.append(result)
        return result

    with running_engine(home):
        ids = []
        for lane in ("out", "pout"):
            queued = nereus("--json", "message", "schedule", "--lane", lane, "--delay", "1s",
                            "--payload", "secured", "--wait")
            assert queued.code == 0, queued.stderr
            ids.append(queued.json()["delay_message_id"])
        wait_until("the messages to be published over SASL_SSL and pulsar+ssl",
                   lambda: all(nereus("--json", "message", "show", mid).json()
                               .get("state") == "PUBLISHED" for mid in ids), 60,
                   interval_s=0.5)
        for args in (("--json", "status"), ("status",), ("--json", "engine", "status"),
                     ("--json", "doctor"), ("doctor",), ("metrics",), ("engine", "logs"),
                     ("--json", "lane", "list"), ("--json", "attempt", "list")):
            nereus(*args)
        screens = tour_home(home, lanes=("out", "pout"),
                            messages=[(mid, "default") for mid in ids])
    assert {"overview", "lane out", "lane pout", f"message {ids[0]}"} <= set(screens)
    assert "PUBLISHED" in screens[f"message {ids[0]}"], screens[f"message {ids[0]}"]
    doctor = next(r for r in outputs if r.stdout.startswith("{") and '"checks"' in r.stdout)
    checks = {c["name"]: c for c in doctor.json()["checks"]}
    assert checks["secrets [kafka.secure]"]["ok"], checks["secrets [kafka.secure]"]
    assert checks[f"kafka {kafka_secure.sasl}"]["ok"], checks[f"kafka {kafka_secure.sasl}"]
    # the lane's topic took the broker's default replication (1 here): doctor warns below 3
    (replication,) = [c for name, c in checks.items()
                      if name.startswith("destination ") and name.endswith(" replication")]
    assert not replication["ok"] and replication["severity"] == "warning", replication
    assert "replication factor 1" in replication["detail"]
    said = "\n".join([r.stdout + r.stderr for r in outputs] + list(screens.values()))
    files = everything_in(home)
    for secret in (password, pulsar_secure.token):
        assert secret not in said
        assert secret.encode() not in files


def test_a_wrong_password_is_named_by_doctor_and_the_cli_without_showing_it(
        tmp_path: Path, kafka_secure: SecureKafka) -> None:
    """doctor fails the broker's check naming [kafka.secure] and the fix; a schedule exits
    5 within seconds with the same; the wrong password appears in neither."""
    home = tmp_path / "home"
    wrong = f"wrong-{uuid.uuid4().hex}"
    secured_home(home, kafka_secure, wrong)
    doctor = run_nereus("--json", "doctor", home=home, timeout=90)
    assert doctor.code == 1, doctor.stderr
    broker = {c["name"]: c for c in doctor.json()["checks"]}[f"kafka {kafka_secure.sasl}"]
    assert not broker["ok"] and "[kafka.secure]" in broker["detail"], broker
    assert "authentication" in broker["detail"].lower() and "sasl.username" in broker["fix"]
    queued = run_nereus("message", "schedule", "--lane", "out", "--delay", "1m",
                        "--payload", "x", home=home, timeout=90)
    assert queued.code == 5, queued.stderr
    assert "[kafka.secure]" in queued.stderr
    assert wrong not in doctor.stdout + doctor.stderr + queued.stdout + queued.stderr


def test_nothing_acknowledged_is_lost_while_a_password_is_fixed(
        tmp_path: Path, kafka_secure: SecureKafka) -> None:
    """The lane's broker refuses a wrong password: messages are acknowledged (the Shard Log
    is the home's file log), the lane is NOT READY saying why with [kafka.secure], nothing
    publishes, and the dashboard's lane screen shows why; the password file is fixed and the
    engine restarted: every message publishes. The wrong password shows nowhere."""
    home = tmp_path / "home"
    wrong = f"wrong-{uuid.uuid4().hex}"
    secured_home(home, kafka_secure, wrong)
    toml = home / "nereus.toml"
    toml.write_text(toml.read_text().replace(
        'log = "kafka"\nkafka = "secure"\n', 'log = "file"\n').replace(
        'topic = "nereus-leak-', 'topic = "nereus-fixed-', 1))
    said: list[str] = []
    with running_engine(home):
        ids = schedule_acknowledged(home, "out", 3)

        def refused() -> str | None:
            lanes = run_nereus("--json", "lane", "list", home=home)
            said.append(lanes.stdout + lanes.stderr)
            lane = next(x for x in lanes.json() if x["lane"] == "out")
            reason = lane["not_ready_reason"] or ""
            return reason if "[kafka.secure]" in reason else None

        wait_until("the lane to say the broker refused [kafka.secure]", refused, 60,
                   interval_s=0.5)
        screens = tour_home(home, lanes=("out",), messages=[(ids[0], "default")])
        assert "[kafka.secure]" in screens["lane out"], screens["lane out"]
        said.extend(screens.values())
    (home / "secrets" / "kafka-password").write_text(kafka_secure.password + "\n")
    with running_engine(home):
        def published() -> bool:
            states = [run_nereus("--json", "message", "show", mid, home=home).json()["state"]
                      for mid in ids]
            return all(state == "PUBLISHED" for state in states)

        wait_until("every message to publish once the password is fixed", published, 60,
                   interval_s=0.5)
    assert not any(wrong in text for text in said)
