"""The coordination Protocol's pure values: prefix ranges, which changes concern a prefix,
and whom the refusals blame."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nereus.coordination import (
    CoordinatorUnavailable,
    KeyNotFound,
    Notification,
    NotificationType,
    SessionExpired,
    UnexpectedVersionId,
    prefix_end,
    prefix_range,
)
from nereus.errors import ExitCode

KEYS = st.text(st.characters(exclude_categories=["Cs"]), max_size=6)


@given(prefix=KEYS.filter(lambda p: bool(p.rstrip(chr(0x10FFFF)))), key=KEYS)
def test_a_prefix_range_holds_exactly_the_keys_with_the_prefix(prefix: str, key: str) -> None:
    """key is in [prefix, prefix_end(prefix)) exactly when it starts with prefix, when
    keys compare by code point as the backends compare them."""
    low, high = prefix_range(prefix)
    assert (low <= key < high) == key.startswith(prefix)


def test_prefix_end_skips_the_surrogates_and_refuses_what_has_no_end() -> None:
    """The end of a prefix is never a surrogate (unencodable in a key), and a prefix of
    only the highest code point (or none at all) has no end."""
    assert prefix_end("nodes/") == "nodes0"
    assert prefix_end("a\ud7ff") == "a\ue000"
    assert prefix_end("a\U0010ffff") == "b"
    with pytest.raises(ValueError):
        prefix_end("\U0010ffff")
    with pytest.raises(ValueError):
        prefix_end("")


@pytest.mark.parametrize(("key", "end", "prefix", "concerns"), [
    ("a/1", None, "a/", True),
    ("a", None, "a/", False),
    ("b/1", None, "a/", False),
    ("a/", "a/5", "a/3", True),  # a range over the prefix
    ("a/2", "a/9", "a/", True),  # a range starting inside it
    ("a/", "a/3", "a/3", False),  # ending right before it
    ("a/4", "a/9", "a/3", False),  # starting after it
])
def test_a_notification_concerns_the_prefixes_it_touches(
        key: str, end: str | None, prefix: str, concerns: bool) -> None:
    """A key change concerns the prefixes of its key; a range delete concerns a prefix
    whose keys the range meets."""
    kind = NotificationType.KEY_DELETED if end is None else NotificationType.KEY_RANGE_DELETED
    note = Notification(type=kind, key=key, version_id=None, key_range_end=end)
    assert note.concerns(prefix) is concerns


def test_the_refusals_name_their_subject_and_carry_their_exit_codes() -> None:
    """Each refusal says what it was about; an absent key is NOT_FOUND, an unreachable
    store SERVICE_UNREACHABLE, a lost race or session NO."""
    stale = UnexpectedVersionId("owner", 7, 9)
    assert "version 7" in str(stale) and "version 9" in str(stale)
    assert "no record" in str(UnexpectedVersionId("owner", -1, 3))
    assert KeyNotFound("owner").exit_code is ExitCode.NOT_FOUND
    assert CoordinatorUnavailable("down").exit_code is ExitCode.SERVICE_UNREACHABLE
    assert SessionExpired(4, "closed").exit_code is ExitCode.NO
    assert stale.exit_code is ExitCode.NO
