"""The doctor's checks of credentials and durability settings that no broker call shows:
each secret ``nereus.toml`` refers to is there and private (its value never shown), an
inline object-store secret and an unsigned (unsecured) OAUTHBEARER token are loud warnings,
and a Kafka destination topic with fewer than 3 replicas is a warning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nereus.cli.commands.doctor_routes import check

if TYPE_CHECKING:
    from pathlib import Path

    from nereus.cli.setup_documents import DoctorCheck
    from nereus.config import Config

DURABLE_REPLICAS = 3


def secret_checks(config: Config, home: Path) -> list[DoctorCheck]:
    """One check per ``[kafka.NAME]``, ``[pulsar.NAME]``, ``[objects]`` and ``[cluster]``
    that refers to a secret: it can be read (files 0600, the engine's user's own; variables
    set). Only where each comes from is shown, never its value."""
    from nereus.adapters.home.secrets import read_secret
    from nereus.errors import ConfigError

    checks: list[DoctorCheck] = []
    for table, what, file, env in _references(config):
        try:
            read_secret(f"[{table}] {what}", file=file, env=env, home=home)
        except ConfigError as exc:
            checks.append(check(f"secrets [{table}]", False, exc.message, exc.hint))
            continue
        source = f"the file {file}" if file is not None else f"${env}"
        checks.append(check(f"secrets [{table}]", True, f"{what} read from {source}"))
    if config.objects.store == "s3" and config.objects.secret_access_key is not None:
        checks.append(check(
            "secrets [objects]", False, "secret_access_key is written in nereus.toml: whoever "
            "reads the file, a copy or a backup of it holds the object store's key",
            "write it to a file (chmod 600) and give secret_access_key_file = PATH, or "
            "secret_access_key_env = NAME, or an AWS profile", severity="warning"))
    checks += [check(f"secrets [kafka.{name}]", False, "enable.sasl.oauthbearer.unsecure.jwt "
                     "= true: the token is unsigned, whoever reaches a broker that accepts it "
                     "may claim any principal (a test broker's setting)",
                     "against a production cluster use OIDC: sasl.oauthbearer.token.endpoint"
                     ".url, sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret_file",
                     severity="warning")
               for name, kafka in sorted(config.kafka.items()) if kafka.oauth_unsecure_jwt]
    return checks


def _references(config: Config) -> list[tuple[str, str, str | None, str | None]]:
    """(table, secret, file, environment variable) of every secret the file refers to."""
    found: list[tuple[str, str, str | None, str | None]] = []
    for name, kafka in sorted(config.kafka.items()):
        found += [(f"kafka.{name}", "sasl.password", kafka.sasl_password_file,
                   kafka.sasl_password_env),
                  (f"kafka.{name}", "ssl.key.password", kafka.ssl_key_password_file,
                   kafka.ssl_key_password_env),
                  (f"kafka.{name}", "sasl.oauthbearer.client.secret", kafka.oauth_secret_file,
                   kafka.oauth_secret_env)]
    for name, pulsar in sorted(config.pulsar.items()):
        found.append((f"pulsar.{name}", "token", pulsar.token_file, pulsar.token_env))
    objects, cluster = config.objects, config.cluster
    if objects.store == "s3":
        found.append(("objects", "secret_access_key", objects.secret_access_key_file,
                      objects.secret_access_key_env))
    if cluster is not None:
        found += [("cluster", "password", cluster.password_file, cluster.password_env),
                  ("cluster", "evidence_seal_key", cluster.evidence_seal_key_file,
                   cluster.evidence_seal_key_env),
                  ("cluster", "evidence_seal_previous_key",
                   cluster.evidence_seal_previous_key_file,
                   cluster.evidence_seal_previous_key_env)]
    return [reference for reference in found if reference[2:] != (None, None)]


def destination_replication(config: Config, silent: set[str]) -> list[DoctorCheck]:
    """A Kafka lane's existing topic with fewer than 3 replicas: one broker lost can lose
    what was published (a warning; a topic not made yet gets the brokers' default)."""
    from nereus.adapters.backends.kafka.kafka_client import admin_client, replica_count
    from nereus.adapters.backends.shardlog.factory import DEFAULT_KAFKA_BOOTSTRAP
    from nereus.errors import NereusError

    checks: list[DoctorCheck] = []
    for lane in sorted(config.lanes.values(), key=lambda lane: lane.name):
        bootstrap = lane.bootstrap or DEFAULT_KAFKA_BOOTSTRAP
        if lane.destination != "kafka" or f"kafka {bootstrap}" in silent:
            continue
        topic = lane.topic or lane.name
        try:
            factor = replica_count(admin_client(bootstrap, "nereus-doctor"), bootstrap, topic,
                                   4.0)
        except NereusError as exc:
            checks.append(check(f"destination {topic} replication", False, exc.message,
                                exc.hint, severity="warning"))
            continue
        if factor == 0:
            continue  # not made yet: the lane creates it with the brokers' default
        checks.append(check(
            f"destination {topic} replication", factor >= DURABLE_REPLICAS,
            f"lane {lane.name}: replication factor {factor}" + (
                "" if factor >= DURABLE_REPLICAS else
                ": losing one broker can lose published messages"),
            "on a cluster of 3 or more brokers raise the topic's replication (kafka-reassign-"
            "partitions) and set replication_factor = 3 on the lane", severity="warning"))
    return checks
