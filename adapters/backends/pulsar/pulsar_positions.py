"""The Source Position of a Pulsar Shard Log record: ``(ledger_id << 32) | entry_id``.

Batching is off, so one record is one entry. Positions increase with the log but are
sparse (a gap at every ledger roll-over): differences are not record counts. Limits:
``ledger_id < 2**31`` (the state store keeps a signed 64-bit position) and
``entry_id < 2**32``; an id outside them raises ``PositionOutOfRange`` rather than wrap.
Changing the encoding changes every stored applied position (a state format bump). The end
position is one past the last entry (``ledger << 32`` for an empty current ledger, 0 for a
topic that never held a message): above every existing position, at most the next one.
"""

from __future__ import annotations

from typing import Final

from nereus.errors import NereusError

LEDGER_LIMIT: Final = 1 << 31
ENTRY_LIMIT: Final = 1 << 32
_ENTRY_MASK: Final = ENTRY_LIMIT - 1


class PositionOutOfRange(NereusError):
    """A MessageId that the position encoding cannot represent."""


def encode_position(ledger_id: int, entry_id: int) -> int:
    """``(ledger_id << 32) | entry_id``; raises if either id is outside the encoding."""
    if not (0 <= ledger_id < LEDGER_LIMIT and 0 <= entry_id < ENTRY_LIMIT):
        raise PositionOutOfRange(
            f"Pulsar MessageId ledger {ledger_id} entry {entry_id} cannot be a Source Position "
            f"(needs 0 <= ledger < 2**31 and 0 <= entry < 2**32)")
    return (ledger_id << 32) | entry_id


def decode_position(position: int) -> tuple[int, int]:
    """(ledger_id, entry_id) of a position."""
    if position < 0:
        raise ValueError(f"a Source Position is never negative: {position}")
    return position >> 32, position & _ENTRY_MASK


def end_after(ledger_id: int, entry_id: int) -> int:
    """The end position for a last MessageId (see the module docstring)."""
    if ledger_id < 0:
        return 0
    if entry_id < 0:
        return encode_position(ledger_id, 0)
    return encode_position(ledger_id, entry_id) + 1
