"""Homes for chaos runs on each backend, written as an operator would write ``nereus.toml``.

Every home has four lanes:

* ``p1`` and ``p2``: plain lanes the destination nemeses fault and operators close;
* ``ord``: an ORDERED lane (``ordered = true``), drawn with few keys;
* ``calm``: a plain lane nothing touches, held to a lateness bound (lane isolation).

``file``: the embedded default (file Shard Log, file destinations under ``outbox/``).
``kafka``: the Command Topic on Kafka and the Kafka destination for ``p1``, ``ord`` and
``calm`` (``p2`` stays a file: one lane whose destination is local). ``pulsar``: the same on
Pulsar. With an S3 endpoint, ``[objects]`` (checkpoints and large payloads) are in S3. The
engine's limits are set small on purpose — few worker and lane permits, a
short claim TTL, evidence scans every second, checkpoints every few seconds — so the
faults a short run injects reach the paths the seeds' rules are about (permits a hung lane
holds, claims that expire, UNKNOWN attempts the evidence scan settles, restores from a
checkpoint).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from nereus.config import parse_config
from tests.chaos.consumers import Consumer, FileConsumer, KafkaConsumer, PulsarConsumer
from tests.chaos.history import LaneInfo
from tests.integration.services import S3Endpoint

Backend = Literal["file", "kafka", "pulsar"]
INLINE_LIMIT = 1_024
PARTITIONS = 2
FAULTED = ("p1", "p2")
ORDERED = ("ord",)
HEALTHY = ("calm",)

ENGINE = """
[engine]
workers = 1
evidence_interval_s = 1
stop_timeout_s = 5
claim_ttl_ms = 3000
max_in_flight = 8
lane_in_flight = 4
payload_gc_interval = "0s"

[checkpoints]
every_records = 120
every_seconds = 3
keep = 3

[shard]
max_inline_payload_bytes = {inline}
"""


@dataclass(frozen=True, slots=True)
class Brokers:
    """The session's brokers and object store (None: not used). With ``s3`` the home's
    ``[objects]`` (checkpoints, large payloads) are in the S3 bucket ``BUCKET``."""

    kafka: str | None = None
    pulsar_url: str | None = None
    pulsar_admin: str | None = None
    s3: S3Endpoint | None = None


BUCKET = "nereus-chaos"


@dataclass(frozen=True, slots=True)
class ChaosHome:
    home: Path
    backend: Backend
    lanes: list[LaneInfo]
    consumers: list[Callable[[], Consumer]]
    shards: list[str]


def make_home(root: Path, backend: Backend, brokers: Brokers) -> ChaosHome:
    """A fresh home under ``root`` for ``backend`` (its topics made first on a broker)."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "outbox").mkdir(exist_ok=True)
    run = uuid.uuid4().hex[:10]
    sections = [_route(backend, brokers, run)]
    lanes: list[LaneInfo] = []
    makers: list[Callable[[], Consumer]] = []
    for name in (*FAULTED, *ORDERED, *HEALTHY):
        destination = "file" if backend == "file" or name == "p2" else backend
        section, info, maker = _lane(home, name, destination, brokers, run)
        sections.append(section)
        lanes.append(info)
        makers.append(maker)
    sections.append(ENGINE.format(inline=INLINE_LIMIT))
    if brokers.s3 is not None:
        sections.append(_objects(brokers.s3, run))
    text = "\n".join(sections)
    parse_config(text, source=str(home / "nereus.toml"))  # a typo fails here, not later
    (home / "nereus.toml").write_text(text)
    home.chmod(0o700)
    return ChaosHome(home, backend, lanes, makers,
                     [f"default/{p}" for p in range(PARTITIONS)])


def _objects(s3: S3Endpoint, run: str) -> str:
    """``[objects]`` in the S3 bucket ``BUCKET`` (made if need be), under a prefix of the
    run's own."""
    client = s3.client()
    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou,
                             client.exceptions.BucketAlreadyExists):
        client.create_bucket(Bucket=BUCKET)
    return (f'[objects]\nstore = "s3"\nbucket = "{BUCKET}"\nprefix = "chaos-{run}/"\n'
            f'endpoint = "{s3.endpoint_url}"\nregion = "{s3.region}"\n'
            f'access_key_id = "{s3.access_key_id}"\n'
            f'secret_access_key = "{s3.secret_access_key}"\n')


def _route(backend: Backend, brokers: Brokers, run: str) -> str:
    head = f'[routes.default]\nid = "{uuid.uuid4().hex}"\npartitions = {PARTITIONS}\n'
    if backend == "kafka":
        assert brokers.kafka
        return head + (f'log = "kafka"\nbootstrap = "{brokers.kafka}"\n'
                       f'topic = "nereus.chaos-{run}.commands"\n')
    if backend == "pulsar":
        assert brokers.pulsar_url and brokers.pulsar_admin
        return head + (f'log = "pulsar"\nservice_url = "{brokers.pulsar_url}"\n'
                       f'admin_url = "{brokers.pulsar_admin}"\n'
                       f'topic = "chaos-{run}-commands"\n')
    return head + 'log = "file"\n'


def _lane(home: Path, name: str, destination: str, brokers: Brokers,
          run: str) -> tuple[str, LaneInfo, Callable[[], Consumer]]:
    ordered = "ordered = true\n" if name in ORDERED else ""
    healthy = name in HEALTHY
    if destination == "kafka":
        assert brokers.kafka
        bootstrap = brokers.kafka
        topic = f"chaos-{run}-{name}"
        _kafka_topic(bootstrap, topic)
        section = (f'[lanes.{name}]\ndestination = "kafka"\nbootstrap = "{bootstrap}"\n'
                   f'topic = "{topic}"\n{ordered}')
        return (section, LaneInfo(name=name, destination="kafka", ordered=bool(ordered),
                                  healthy=healthy, target=topic),
                lambda: KafkaConsumer(name, bootstrap, topic))
    if destination == "pulsar":
        assert brokers.pulsar_url
        url = brokers.pulsar_url
        topic = f"persistent://public/default/chaos-{run}-{name}"
        section = (f'[lanes.{name}]\ndestination = "pulsar"\nservice_url = "{url}"\n'
                   f'topic = "{topic}"\n{ordered}')
        return (section, LaneInfo(name=name, destination="pulsar", ordered=bool(ordered),
                                  healthy=healthy, target=topic),
                lambda: PulsarConsumer(name, url, topic))
    path = home / "outbox" / f"{name}.jsonl"
    section = f'[lanes.{name}]\ndestination = "file"\npath = "outbox/{name}.jsonl"\n{ordered}'
    return (section, LaneInfo(name=name, destination="file", ordered=bool(ordered),
                              healthy=healthy, target=str(path)),
            lambda: FileConsumer(name, path))


def _kafka_topic(bootstrap: str, topic: str) -> None:
    from tests.integration.kafka_topic import create_topic

    create_topic(bootstrap, topic, 1)
