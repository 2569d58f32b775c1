"""Homes on the session's real brokers: the ``nereus.toml`` sections the broker tests
write, and writing them. A section is text an operator could have typed; ``write_home``
joins them and parses the result, so a typo fails here, not in the engine."""

from __future__ import annotations

import re
from pathlib import Path

from nereus.adapters.backends.kafka.kafka_log import KafkaShardLog
from nereus.config import Config, parse_config
from tests.integration.shard_logs import ShardLogs


def kafka_route(bootstrap: str, topic: str, partitions: int) -> str:
    """``[routes.default]`` with its Shard Logs on the Kafka Command Topic ``topic``."""
    return (f'[routes.default]\nlog = "kafka"\nbootstrap = "{bootstrap}"\ntopic = "{topic}"\n'
            f"partitions = {partitions}\n")


def kafka_lane(name: str, bootstrap: str, topic: str) -> str:
    """``[lanes.NAME]`` publishing to the Kafka topic ``topic``."""
    return f'[lanes.{name}]\ndestination = "kafka"\nbootstrap = "{bootstrap}"\ntopic = "{topic}"\n'


def write_home(home: Path, *sections: str) -> Config:
    """``home`` (made if need be) with a ``nereus.toml`` of ``sections``; its config."""
    home.mkdir(parents=True, exist_ok=True)
    text = "\n".join(sections)
    (home / "nereus.toml").write_text(text)
    return parse_config(text, source=str(home / "nereus.toml"))


def kafka_logs(bootstrap: str, topic: str, partitions: int) -> ShardLogs:
    """The Shard Logs of a route on the Kafka Command Topic ``topic``, each opened (never
    created: the engine made the topic) when first needed."""
    return ShardLogs(lambda shard: KafkaShardLog(bootstrap, topic, shard.partition,
                                                 partitions=partitions, create=False))


def point_route_at(config: Path, settings: dict[str, str]) -> None:
    """Set the one route's broker addresses in ``config`` (``bootstrap``, ``service_url``,
    ``admin_url``: what ``nereus init --log`` wrote, or after ``partitions`` if it wrote
    none) to the session's broker."""
    text = config.read_text()
    for key, value in settings.items():
        text, found = re.subn(rf'^{key} = "[^"]*"', f'{key} = "{value}"', text, flags=re.M)
        if not found:
            text = re.sub(r"^(partitions = \d+\n)", rf'\g<1>{key} = "{value}"\n', text,
                          count=1, flags=re.M)
    config.write_text(text)
