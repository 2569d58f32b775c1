"""The key schema reads its own keys back (``nereus.state.keys``): the shell asks it what
a ``result`` or ``reject`` key names instead of slicing prefixes itself."""

from __future__ import annotations

from nereus.state import keys


def test_a_result_key_gives_back_its_dedup_key_and_a_reject_key_its_position() -> None:
    """``dedup_key_of`` and ``reject_position_of`` invert ``result_key`` and ``reject_key``;
    a key is replicated state when its family is below the local runtime state's."""
    assert keys.dedup_key_of(keys.result_key("c/cmd-é 1")) == "c/cmd-é 1"
    assert [keys.reject_position_of(keys.reject_key(p)) for p in (0, 7, 2**63 - 1)] == [
        0, 7, 2**63 - 1]
    assert keys.is_replicated(keys.result_key("c/x"))
    assert not keys.is_replicated(keys.CLAIM + b"x")
