"""Fetch the destination record an operator's evidence reference names, to verify it.

``attempt resolve --published --evidence REF`` names where the message landed, in the form
the destinations report evidence:

* ``kafka:TOPIC/PARTITION@OFFSET``
* ``pulsar:TOPIC@LEDGER:ENTRY:PARTITION`` (partition -1: a topic that is not partitioned)
* ``PATH@OFFSET`` (a file destination's line at that byte offset)

``fetch_evidence`` reads that one record and returns the attempt id and evidence MAC it
carries; the caller checks them against the attempt (``nereus.evidence_mac``). Anything
else is free text, which proves nothing by itself (``--unverified``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from nereus.config import LaneSettings
from nereus.errors import NotFound, UsageError

_KAFKA = re.compile(r"^kafka:(?P<topic>[^/@\s]+)/(?P<partition>\d+)@(?P<offset>\d+)$")
_PULSAR = re.compile(r"^pulsar:(?P<topic>\S+)@(?P<ledger>\d+):(?P<entry>\d+):"
                     r"(?P<partition>-?\d+)$")
_FILE = re.compile(r"^(?P<path>/\S+)@(?P<offset>\d+)$")
FETCH_TIMEOUT_S = 15.0
"""How long a fetch waits for the broker (each broker's ``fetch_record`` reads it)."""


@dataclass(frozen=True, slots=True)
class Fetched:
    """What the referenced record carries."""

    where: str
    attempt_id: str | None
    mac: str | None


def is_reference(text: str) -> bool:
    """Whether ``text`` names a destination record (rather than being free text)."""
    text = text.strip()
    return bool(_KAFKA.match(text) or _PULSAR.match(text) or _FILE.match(text))


def fetch_evidence(reference: str, lane: LaneSettings) -> Fetched:
    """The attempt id and MAC of the record ``reference`` names, read from ``lane``'s
    destination (its bootstrap or service URL). Raises NotFound when there is no record."""
    text = reference.strip()
    if (found := _KAFKA.match(text)) is not None:
        from nereus.adapters.backends.kafka.kafka_evidence import fetch_record

        return fetch_record(text, lane, found["topic"], int(found["partition"]),
                            int(found["offset"]))
    if (found := _PULSAR.match(text)) is not None:
        from nereus.adapters.backends.pulsar.pulsar_evidence import fetch_record as pulsar_record

        return pulsar_record(text, lane, found["topic"], int(found["ledger"]),
                             int(found["entry"]), int(found["partition"]))
    if (found := _FILE.match(text)) is not None:
        return _file(text, Path(found["path"]), int(found["offset"]))
    raise UsageError(f"{reference!r} is not a destination reference",
                     hint="kafka:TOPIC/PARTITION@OFFSET, pulsar:TOPIC@LEDGER:ENTRY:PARTITION "
                     "or PATH@OFFSET; free text needs --unverified")


def _file(where: str, path: Path, offset: int) -> Fetched:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            line = handle.readline()
    except OSError as exc:
        raise NotFound(f"{where}: {exc.strerror}") from None
    try:
        record = json.loads(line)
    except ValueError:
        raise NotFound(f"{where}: no complete line starts at byte {offset}") from None
    if not isinstance(record, dict):
        raise NotFound(f"{where}: the line is not a published record")
    return Fetched(where, text_of(record.get("attempt_id")), text_of(record.get("mac")))


def text_of(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value if isinstance(value, str) else None
