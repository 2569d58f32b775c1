"""Log frames: ``read_frames`` (the reader's loop) agrees with ``read_frame`` frame by frame.

``read_frames`` spells the checks of ``read_frame`` out for speed; these properties keep
the two in step on intact, damaged and cut buffers.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nereus.framing import BadFrame, Frame, encode_frame, read_frame, read_frames

frames = st.lists(st.tuples(st.integers(0, 2**63 - 1), st.binary(max_size=64)), max_size=8)


def _one_by_one(buf: bytes, limit: int) -> tuple[list[tuple[int, bytes]], int, str | None]:
    """What read_frame says, frame after frame: the frames, where it stopped, and why."""
    found: list[tuple[int, bytes]] = []
    pos = 0
    while len(found) < limit and pos < len(buf):
        frame = read_frame(buf, pos)
        if isinstance(frame, BadFrame):
            return found, pos, frame.problem
        assert isinstance(frame, Frame)
        found.append((frame.broker_ms, frame.payload))
        pos = frame.end
    return found, pos, None


@given(frames, st.data(), st.integers(1, 10))
def test_read_frames_matches_read_frame_on_damaged_and_cut_buffers(
    items: list[tuple[int, bytes]], data: st.DataObject, limit: int,
) -> None:
    """Intact, one byte flipped, or cut short: the same frames, the same stop, same reason."""
    buf = bytearray(b"".join(encode_frame(ms, payload) for ms, payload in items))
    damage = data.draw(st.sampled_from(["none", "flip", "cut"]))
    if buf and damage == "flip":
        at = data.draw(st.integers(0, len(buf) - 1))
        buf[at] ^= data.draw(st.integers(1, 255))
    elif buf and damage == "cut":
        del buf[data.draw(st.integers(0, len(buf) - 1)):]
    run = read_frames(bytes(buf), 0, limit)
    found, stop, problem = _one_by_one(bytes(buf), limit)
    assert run.frames == found
    assert run.end == stop
    assert (run.stopped_by.problem if run.stopped_by else None) == problem
    if damage == "none":
        assert run.frames == items[:limit] and problem is None
