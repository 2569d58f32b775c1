"""The doctor's checks of credentials and durability settings that no broker call shows:
each secret ``nereus.toml`` refers to is there and private (its value never shown), an
inline object-store secret is a loud warning, and a Kafka destination topic with fewer than
3 replicas is a warning.
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
    """One check per ``[kafka.NAME]`` and for ``[objects]``: its secrets can be read (files
    0600, the engine's user's own; variables set). Only where each comes from is shown."""
    from nereus.adapters.backends.kafka.kafka_security import librdkafka_settings
    from nereus.adapters.home.secrets import read_secret
    from nereus.errors import ConfigError

    checks: list[DoctorCheck] = []
    for name, connection in sorted(config.kafka.items()):
        try:
            settings = librdkafka_settings(connection, home)
        except ConfigError as exc:
            checks.append(check(f"secrets [kafka.{name}]", False, exc.message, exc.hint))
            continue
        held = sorted(k for k in settings if "password" in k or "secret" in k)
        checks.append(check(f"secrets [kafka.{name}]", True,
                            f"{', '.join(held)} read from private files or the environment"
                            if held else f"{connection.security_protocol}: no secret needed"))
    objects = config.objects
    if objects.store != "s3":
        return checks
    if objects.secret_access_key is not None:
        checks.append(check(
            "secrets [objects]", False, "secret_access_key is written in nereus.toml: whoever "
            "reads the file, a copy or a backup of it holds the object store's key",
            "write it to a file (chmod 600) and give secret_access_key_file = PATH, or "
            "secret_access_key_env = NAME, or an AWS profile", severity="warning"))
        return checks
    try:
        read_secret("[objects] secret_access_key", file=objects.secret_access_key_file,
                    env=objects.secret_access_key_env, home=home)
    except ConfigError as exc:
        checks.append(check("secrets [objects]", False, exc.message, exc.hint))
    return checks


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
