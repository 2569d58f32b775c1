"""The Source Position of a Pulsar Shard Log record: its MessageId packed into one integer.

::

    position = (ledger_id << 32) | entry_id

The producer sends with batching DISABLED, so one message is one BookKeeper entry and no
two records share a (ledger, entry). **Positions are sparse**: they increase with the log
(entries within a ledger are numbered 0, 1, 2, ... and a later ledger always has a larger
id), but there is a gap whenever the topic rolls over to a new ledger. Limits:
``ledger_id < 2**31``, so a position fits the signed 64-bit integer the state store keeps
(ledger ids come from one cluster-wide counter, so a busy cluster uses them up faster than
this topic alone would), and ``entry_id < 2**32`` (a ledger holds at most
``managedLedgerMaxEntriesPerLedger`` entries, 50,000 by default). An id outside these limits
raises ``PositionOutOfRange`` rather than wrapping into a wrong position; changing the
encoding changes every stored applied position, so it bumps the state format. Differences
of positions are not record counts.

**The end position** is one past the last entry: ``(ledger << 32) + entry + 1``;
``ledger << 32`` when the current ledger is still empty (everything existing is in an
earlier ledger); 0 for a topic that never held a message. It is greater than every existing
position and at most the next one appended.
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
