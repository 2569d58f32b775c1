"""The values the coordination Protocol speaks in: records, versions, notifications.

They mirror Oxia's client (``oxia.Version``, ``oxia.defs.Notification``), so an Oxia backend
only converts; etcd's key-values map onto them (``version_id`` = ``mod_revision``,
``modifications_count`` = ``version - 1``, ``session_id`` = the lease). Ranges compare keys
by code point (UTF-8 byte order: etcd's and SQLite's); Oxia sorts by ``/`` segment, and the
two agree on ranges under a prefix ending in ``/`` with no further ``/``, the only kind the
cluster uses (``prefix_range``). Every write takes the next value of one store-wide counter
(Oxia's WAL offset, etcd's revision, SQLite's revision row): ``version_id`` is a fencing
token within one store. A shard's epoch is its own counter
(``docs/decisions/0018-shard-epoch-counter.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

EXPECTED_RECORD_DOES_NOT_EXIST: Final = -1
"""``expected_version_id`` meaning "the key must not exist" (Oxia's constant)."""

_MAX_CODE_POINT: Final = 0x10FFFF
_SURROGATES: Final = range(0xD800, 0xE000)  # not encodable in UTF-8: never part of a key


@dataclass(frozen=True, slots=True, kw_only=True)
class Version:
    """What a store knows about one record besides its value."""

    version_id: int  # the store's counter after the write that made this version
    modifications_count: int  # puts since the record was (re)created; 0 for a new record
    created_timestamp_ms: int  # wall clock of the store when the record was (re)created
    modified_timestamp_ms: int  # wall clock of the store at the latest put
    session_id: int | None  # the owning session of an ephemeral record; None otherwise
    client_identity: str | None  # who made the ephemeral record (its session's identity)

    @property
    def is_ephemeral(self) -> bool:
        """Whether the record vanishes with its session."""
        return self.session_id is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """A key, its value and its version, as ``get`` and ``range_scan`` return it."""

    key: str
    value: bytes
    version: Version


class NotificationType(StrEnum):
    """What happened to a key (Oxia's ``NotificationType``)."""

    KEY_CREATED = "KEY_CREATED"  # a put of a key that did not exist
    KEY_MODIFIED = "KEY_MODIFIED"  # a put of a key that existed
    KEY_DELETED = "KEY_DELETED"  # a delete, a range delete, or its session's end
    # Oxia reports ``delete_range`` as one notification for the range; etcd and the
    # embedded coordinator report one KEY_DELETED per key. A consumer handles both.
    KEY_RANGE_DELETED = "KEY_RANGE_DELETED"


@dataclass(frozen=True, slots=True, kw_only=True)
class Notification:
    """One change, in the order the store made them."""

    type: NotificationType
    key: str  # for KEY_RANGE_DELETED: the first key of the range
    version_id: int | None  # the record's new version; None for deletions
    key_range_end: str | None = None  # KEY_RANGE_DELETED only: the range's end (exclusive)

    def concerns(self, prefix: str) -> bool:
        """Whether the change touches a key that starts with ``prefix``."""
        if self.type is not NotificationType.KEY_RANGE_DELETED or self.key_range_end is None:
            return self.key.startswith(prefix)
        if self.key.startswith(prefix):
            return True
        # the range [key, end) meets the prefix's keys iff it starts before them and ends
        # after the prefix itself (the smallest key that has it)
        return self.key < prefix < self.key_range_end


def prefix_end(prefix: str) -> str:
    """The smallest key above every key that starts with ``prefix``: ``[prefix,
    prefix_end(prefix))`` holds exactly the keys with that prefix."""
    stem = prefix.rstrip(chr(_MAX_CODE_POINT))
    if not stem:
        raise ValueError(f"no key is above every key starting with {prefix!r}")
    code = ord(stem[-1]) + 1
    if code in _SURROGATES:
        code = _SURROGATES.stop
    return stem[:-1] + chr(code)


def prefix_range(prefix: str) -> tuple[str, str]:
    """``(min_key_inclusive, max_key_exclusive)`` of the keys that start with ``prefix``."""
    return prefix, prefix_end(prefix)
