"""A cluster on a secured coordinator set up from the command line, as an operator does it:
``nereus cluster init --coordinator URL`` and ``nereus init --join URL`` with ``--tls-ca-file``,
``--tls-cert-file``, ``--tls-key-file`` (and etcd's ``--username`` / ``--password-file``),
against the real ``oxia-secure`` and ``etcd-secure``; the node's home keeps the settings, so
``cluster status`` there connects the same way, and any command given ``--coordinator URL``
elsewhere takes the same options. Without them, or with a part missing, the command exits 5
naming the setting to give."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from nereus.config import ClusterSettings, parse_config
from tests.cli.cluster_homes import cluster_file
from tests.conftest import run_nereus
from tests.integration.secure_services import SecureEtcd, SecureOxia


def flags(settings: ClusterSettings) -> list[str]:
    """The command-line options that say what ``settings`` says."""
    given = {"--tls-ca-file": settings.tls_ca_file, "--tls-cert-file": settings.tls_cert_file,
             "--tls-key-file": settings.tls_key_file, "--username": settings.username,
             "--password-file": settings.password_file}
    return [part for flag, value in given.items() if value is not None
            for part in (flag, value)]


def secured(request: pytest.FixtureRequest, kind: str, cluster: str) -> ClusterSettings:
    if kind == "oxia":
        oxia: SecureOxia = request.getfixturevalue("oxia_secure")
        return oxia.cluster_settings(cluster)
    etcd: SecureEtcd = request.getfixturevalue("etcd_secure")
    return etcd.cluster_settings(cluster)


@pytest.mark.parametrize("kind", [pytest.param("oxia", marks=pytest.mark.oxia),
                                  pytest.param("etcd", marks=pytest.mark.etcd)])
def test_a_cluster_on_a_secured_coordinator_is_set_up_from_the_command_line(
        tmp_path: Path, request: pytest.FixtureRequest, kind: str) -> None:
    """cluster init and init --join reach the secured coordinator with the options; the
    node's nereus.toml keeps them (absolute paths), and cluster status from that home
    connects with them; from elsewhere, status without them exits 5 naming tls_ca_file, and
    cluster status and upgrade status given them connect."""
    cluster = "cli-" + hashlib.blake2b(str(tmp_path).encode(), digest_size=8).hexdigest()
    settings = secured(request, kind, cluster)
    url = settings.coordinator
    written = run_nereus("--json", "cluster", "init", "--coordinator", url, "--from",
                         str(cluster_file(tmp_path)), "--reason", "first", *flags(settings),
                         home=tmp_path / "operator")
    assert written.code == 0, written.stderr
    node = tmp_path / "node"
    joined = run_nereus("--json", "init", "--join", url, "--node-id", "n1", *flags(settings),
                        home=node)
    assert joined.code == 0, joined.stderr
    kept = parse_config((node / "nereus.toml").read_text()).cluster
    assert kept is not None and kept.tls_ca_file == settings.tls_ca_file
    assert kept.tls_cert_file == settings.tls_cert_file and kept.username == settings.username
    status = run_nereus("--json", "cluster", "status", home=node)
    assert status.code == 0, status.stderr
    assert json.loads(status.stdout)["cluster"] == cluster
    plain = run_nereus("--json", "cluster", "status", "--coordinator", url,
                       home=tmp_path / "elsewhere")
    assert plain.code == 5, (plain.stdout, plain.stderr)
    assert "tls_ca_file" in plain.stdout + plain.stderr or kind == "etcd", plain
    given = run_nereus("--json", "cluster", "status", "--coordinator", url, *flags(settings),
                       home=tmp_path / "elsewhere")
    assert given.code == 0, given.stderr
    assert json.loads(given.stdout)["cluster"] == cluster
    level = run_nereus("--json", "upgrade", "status", "--coordinator", url, *flags(settings),
                       home=tmp_path / "elsewhere")
    assert level.code == 0, level.stderr
    assert json.loads(level.stdout)["scope"] == "cluster"


@pytest.mark.oxia
def test_a_missing_client_certificate_on_the_command_line_exits_5_naming_it(
        tmp_path: Path, oxia_secure: SecureOxia) -> None:
    """cluster init with the CA but without the client certificate Oxia requires exits 5
    at once, naming the connection and --tls-cert-file's setting, without gRPC's own log
    lines; a certificate without its key is refused as bad usage before any connection."""
    settings = oxia_secure.cluster_settings("cli-no-cert", client=False)
    source = str(cluster_file(tmp_path))
    refused = run_nereus("--json", "cluster", "init", "--coordinator", settings.coordinator,
                         "--from", source, *flags(settings), home=tmp_path / "operator")
    assert refused.code == 5, (refused.stdout, refused.stderr)
    said = refused.stdout + refused.stderr
    assert f"Oxia at {oxia_secure.host}:{oxia_secure.port}" in said and "tls_cert_file" in said
    assert "ssl_transport_security" not in refused.stderr, "gRPC's own log lines shown"
    half = run_nereus("--json", "cluster", "init", "--coordinator", settings.coordinator,
                      "--from", source, *flags(settings), "--tls-cert-file",
                      str(oxia_secure.certs / "client.pem"), home=tmp_path / "operator")
    assert half.code == 2 and "tls_key_file" in half.stdout + half.stderr, half


@pytest.mark.parametrize("kind", [pytest.param("oxia", marks=pytest.mark.oxia),
                                  pytest.param("etcd", marks=pytest.mark.etcd)])
def test_a_cluster_moves_to_a_secured_coordinator_from_the_command_line(
        tmp_path: Path, request: pytest.FixtureRequest, kind: str) -> None:
    """A cluster on an embedded coordinator is migrated to the secured one and its node's
    home rejoined there with the options: without them migrate and rejoin exit 5 and
    change nothing; with them the home's [cluster] names the new coordinator and its
    settings, and cluster status from the home connects."""
    from nereus.adapters.cluster.coordinator_url import sqlite_url

    cluster = "mv-" + hashlib.blake2b(str(tmp_path).encode(), digest_size=8).hexdigest()
    source = sqlite_url(tmp_path / "coord.db", cluster)
    written = run_nereus("--json", "cluster", "init", "--coordinator", source, "--from",
                         str(cluster_file(tmp_path)), "--reason", "first",
                         home=tmp_path / "operator")
    assert written.code == 0, written.stderr
    node = tmp_path / "node"
    assert run_nereus("--json", "init", "--join", source, "--node-id", "n1", home=node).code == 0
    settings = secured(request, kind, cluster)
    url = settings.coordinator
    move = ("--json", "cluster", "migrate", "--to", url, "--reason", "secured", "--yes")
    plain = run_nereus(*move, home=node)
    assert plain.code == 5, (plain.stdout, plain.stderr)
    moved = run_nereus(*move, *flags(settings), home=node)
    assert moved.code == 0, moved.stderr
    assert json.loads(moved.stdout)["result"] == "MIGRATED"
    text = (node / "nereus.toml").read_text()
    refused = run_nereus("--json", "cluster", "rejoin", "--to", url, home=node)
    assert refused.code == 5 and (node / "nereus.toml").read_text() == text, refused
    rejoined = run_nereus("--json", "cluster", "rejoin", "--to", url, *flags(settings),
                          home=node)
    assert rejoined.code == 0, rejoined.stderr
    assert json.loads(rejoined.stdout)["result"] == "REJOINED"
    kept = parse_config((node / "nereus.toml").read_text()).cluster
    assert kept is not None and kept.coordinator == url and kept.node_id == "n1"
    assert (kept.tls_ca_file, kept.tls_cert_file, kept.username) == (
        settings.tls_ca_file, settings.tls_cert_file, settings.username)
    status = run_nereus("--json", "cluster", "status", home=node)
    assert status.code == 0, status.stderr
    assert json.loads(status.stdout)["coordinator"] == url


@pytest.mark.etcd
@pytest.mark.oxia
def test_a_node_moved_from_secured_etcd_to_secured_oxia_takes_oxias_settings(
        tmp_path: Path, etcd_secure: SecureEtcd, oxia_secure: SecureOxia) -> None:
    """From etcd-secure to oxia-secure: rejoin without options exits 2 saying the home's
    settings (an etcd user) do not fit Oxia and naming the options, the file unchanged;
    with Oxia's options they replace every TLS and auth line, the user included."""
    cluster = "eo-" + hashlib.blake2b(str(tmp_path).encode(), digest_size=8).hexdigest()
    etcd, oxia = etcd_secure.cluster_settings(cluster), oxia_secure.cluster_settings(cluster)
    written = run_nereus("--json", "cluster", "init", "--coordinator", etcd.coordinator,
                         "--from", str(cluster_file(tmp_path)), "--reason", "first",
                         *flags(etcd), home=tmp_path / "operator")
    assert written.code == 0, written.stderr
    node = tmp_path / "node"
    joined = run_nereus("--json", "init", "--join", etcd.coordinator, "--node-id", "n1",
                        *flags(etcd), home=node)
    assert joined.code == 0, joined.stderr
    moved = run_nereus("--json", "cluster", "migrate", "--to", oxia.coordinator, "--reason",
                       "to Oxia", "--yes", *flags(oxia), home=node)
    assert moved.code == 0, moved.stderr
    text = (node / "nereus.toml").read_text()
    unfit = run_nereus("--json", "cluster", "rejoin", "--to", oxia.coordinator, home=node)
    said = unfit.stdout + unfit.stderr
    assert unfit.code == 2 and "do not fit" in said and "--tls-ca-file" in said, unfit
    assert (node / "nereus.toml").read_text() == text
    rejoined = run_nereus("--json", "cluster", "rejoin", "--to", oxia.coordinator,
                          *flags(oxia), home=node)
    assert rejoined.code == 0, rejoined.stderr
    kept = parse_config((node / "nereus.toml").read_text()).cluster
    assert kept is not None and kept.coordinator == oxia.coordinator
    assert (kept.tls_cert_file, kept.username, kept.password_file) == (
        oxia.tls_cert_file, None, None)
