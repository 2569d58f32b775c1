"""An address never carries a password. A coordinator URL
``etcd://USER:PASSWORD@HOST:PORT/CLUSTER`` (or ``oxia://...``) is refused before any
connection (exit 2) naming where the user and password go instead (``--username``,
``--password-file``, ``[cluster] password_file``), and the password is in no output and no
file written: not in ``init --join``'s nereus.toml, not in the message about a URL that is
wrong in another way (a bad port). A broker, admin API or object store address in
nereus.toml with USER:PASSWORD@ is refused naming its table and key, never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_nereus

PASSWORD = "pw-url-credentials-5f0c2e9a"  # fixed: it names parametrized tests, which
# every xdist worker must collect alike


@pytest.mark.parametrize("url", [
    f"etcd://nereus:{PASSWORD}@127.0.0.1:2479/c1",
    f"etcd://nereus:{PASSWORD}@127.0.0.1:99x/c1",  # a bad port as well
    f"oxia://nereus:{PASSWORD}@127.0.0.1:6648/c1",
    f"etcd://{PASSWORD}@127.0.0.1/c1",
    f"sqlite://nereus:{PASSWORD}@/tmp/coord.db/c1",
    f"nereus:{PASSWORD}@127.0.0.1:2479/c1",  # no scheme at all
])
def test_a_url_with_a_password_is_refused_without_showing_it(tmp_path: Path, url: str) -> None:
    """cluster status and init --join exit 2 on such a URL, naming --password-file; the
    password is in neither output and in no file of the homes."""
    status = run_nereus("--json", "cluster", "status", "--coordinator", url,
                        home=tmp_path / "operator")
    joined = run_nereus("--json", "init", "--join", url, "--node-id", "n1",
                        home=tmp_path / "node")
    for result in (status, joined):
        said = result.stdout + result.stderr
        assert result.code == 2, said
        assert PASSWORD not in said
        assert "--password-file" in said, said
    written = [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()]
    assert not [data for data in written if PASSWORD.encode() in data]


def test_a_node_file_naming_such_a_url_is_refused_without_showing_it(tmp_path: Path) -> None:
    """A [cluster] coordinator written by hand with a password in it: status and doctor
    refuse it naming [cluster] password_file, and show no password."""
    home = tmp_path / "node"
    home.mkdir(mode=0o700)
    (home / "nereus.toml").write_text(
        f'[cluster]\ncoordinator = "etcd://nereus:{PASSWORD}@127.0.0.1:2479/c1"\n'
        'node_id = "n1"\n')
    for args in (("--json", "status"), ("status",), ("--json", "doctor"), ("doctor",)):
        result = run_nereus(*args, home=home)
        said = result.stdout + result.stderr
        assert result.code in (1, 2), (args, said)
        assert PASSWORD not in said, (args, said)
        assert "password_file" in said, (args, said)


TABLES = {
    "[kafka.k] bootstrap": ('[kafka.k]\nbootstrap = "nereus:{pw}@127.0.0.1:9092"\n\n'
                            '[lanes.kl]\ndestination = "kafka"\nkafka = "k"\ntopic = "t"\n'),
    "[lanes.kl] bootstrap": ('[lanes.kl]\ndestination = "kafka"\n'
                             'bootstrap = "127.0.0.1:9092,nereus:{pw}@127.0.0.2:9092"\n'
                             'topic = "t"\n'),
    "[pulsar.p] admin_url": ('[pulsar.p]\nservice_url = "pulsar://127.0.0.1:6650"\n'
                             'admin_url = "http://admin:{pw}@127.0.0.1:8080"\n'),
    "[pulsar.p] service_url": '[pulsar.p]\nservice_url = "pulsar://{pw}@127.0.0.1:6650"\n',
    "[lanes.pl] admin_url": ('[lanes.pl]\ndestination = "pulsar"\n'
                             'service_url = "pulsar://127.0.0.1:6650"\n'
                             'admin_url = "http://admin:{pw}@127.0.0.1:8080"\ntopic = "t"\n'),
    "[routes.r] bootstrap": ('[routes.r]\nlog = "kafka"\n'
                             'bootstrap = "nereus:{pw}@127.0.0.1:9092"\n'),
    "[objects] endpoint": ('[objects]\nstore = "s3"\nbucket = "b"\n'
                           'endpoint = "https://AKIA:{pw}@127.0.0.1:9000"\n'),
}


@pytest.mark.parametrize("where", list(TABLES))
def test_an_address_with_a_password_in_nereus_toml_is_refused_without_showing_it(
        tmp_path: Path, where: str) -> None:
    """A broker, admin or object store address written with USER:PASSWORD@ is refused
    (doctor fails its config check, a command exits 2) naming the table and key, never
    showing the password."""
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    with (home / "nereus.toml").open("a") as toml:
        toml.write("\n" + TABLES[where].format(pw=PASSWORD))
    doctor = run_nereus("--json", "doctor", home=home)
    status = run_nereus("status", home=home)
    for result in (doctor, status):
        said = result.stdout + result.stderr
        assert result.code in (1, 2), said
        assert PASSWORD not in said, said
        assert where in said and "USER:PASSWORD@" in said, said
