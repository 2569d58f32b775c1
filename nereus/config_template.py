"""The ``nereus.toml`` a new home starts with (``nereus init``, ``nereus quickstart``)."""

from __future__ import annotations


def render_config(*, route: str, partitions: int, log: str, route_id: str) -> str:
    """The nereus.toml ``nereus init`` writes."""
    broker = {
        "kafka": 'bootstrap = "127.0.0.1:9092"\n',
        "pulsar": 'service_url = "pulsar://127.0.0.1:6650"\nadmin_url = "http://127.0.0.1:8080"\n',
    }.get(log, "")
    return f"""# Nereus Delay configuration (written by `nereus init`).

[routes.{route}]
id = "{route_id}"  # this route's identity, in the first record of each log partition
log = "{log}"          # file (embedded) | kafka | pulsar
partitions = {partitions}
{broker}
[lanes.local]
destination = "file"
path = "outbox/local.jsonl"  # relative to this home, or absolute

[shard]
max_inline_payload_bytes = 65536
"""
