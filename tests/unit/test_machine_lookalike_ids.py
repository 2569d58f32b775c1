"""Apply refuses ids that print like another id, whoever wrote the record (issue 38 item 4)."""

from __future__ import annotations

import unicodedata

import pytest

from nereus import records as r
from nereus.invisible_text import find_invisible
from nereus.machine import Reason
from nereus.records import ResultStatus
from nereus.state import keys
from nereus.testing import MemoryShard
from tests.unit.builders import schedule

_SHA = "0" * 64


@pytest.mark.parametrize(("mid", "detail"), [
    ("a\u200bb", "delay_message_id holds an invisible or space-like character (U+200B) at "
                 "character 1"),
    ("a\u00a0b", "delay_message_id holds an invisible or space-like character (U+00A0) at "
                 "character 1"),
    ("x\ufe0f", "delay_message_id holds an invisible or space-like character (U+FE0F) at "
                "character 1"),
    (" m", "delay_message_id starts with a space (character 0)"),
    ("m ", "delay_message_id ends with a space (character 1)"),
    ("  ", "delay_message_id is only spaces"),
])
def test_a_schedule_of_a_lookalike_id_is_rejected_naming_it(mid: str, detail: str) -> None:
    """A SCHEDULE whose id holds an invisible or space-like character, or a space at either
    end, is REJECTED INVALID_FIELD with the character and its position; nothing is stored."""
    shard = MemoryShard()
    result = shard.result(schedule(mid, cmd="c1"))
    assert (result.status, result.reason, result.detail) == (
        ResultStatus.REJECTED, Reason.INVALID_FIELD, detail)
    assert shard.keys_with_prefix(keys.MSG) == []


def test_a_control_character_is_still_named_as_one() -> None:
    """A bidi override is both a control and a format character: it is named a control
    character, as before."""
    result = MemoryShard().result(schedule("a\u202eb", cmd="c1"))
    assert result.detail == "delay_message_id holds a control character (U+202E) at character 1"


def test_a_payload_reservation_refuses_a_lookalike_payload_id() -> None:
    """PAYLOAD_RESERVE checks its payload id like any other id."""
    result = MemoryShard().result(r.PayloadReserve(
        command_id="c1", payload_id="p\u2060", size_bytes=10, sha256=_SHA,
        expires_at_ms=10_000))
    assert (result.status, result.reason) == (ResultStatus.REJECTED, Reason.INVALID_FIELD)
    assert "U+2060" in (result.detail or "")


def test_plain_ids_and_inner_spaces_are_applied() -> None:
    """Letters, digits, punctuation, non-Latin letters, emoji and a space inside an id are
    applied as before."""
    shard = MemoryShard()
    for n, mid in enumerate(["order-42", "order 42", "заказ:7", "注文_9", "\U0001f680x"]):
        assert shard.result(schedule(mid, cmd=f"c{n}")).status == ResultStatus.APPLIED, mid


def test_the_table_holds_every_format_and_non_ascii_space_character() -> None:
    """Every character of categories Cf, Zs (but U+0020), Zl and Zp in this Python's Unicode
    is in the fixed table (the table is fixed so that apply decides alike on every Python)."""
    missing = [f"U+{cp:04X}" for cp in range(0x110000)
               if unicodedata.category(chr(cp)) in ("Cf", "Zs", "Zl", "Zp") and cp != 0x20
               and find_invisible(chr(cp)) is None]
    assert missing == []
    assert find_invisible("plain ascii, with spaces & punctuation!") is None
