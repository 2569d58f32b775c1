"""The feed loop: it reports snapshots, reports outages, reconnects, and stops promptly."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from nereus.tui.feed import follow_feed
from nereus.tui.source import Snapshot
from tests.tui.fakes import SOCKET, DownSource, FakeSource, snapshots


class _Record:
    def __init__(self, stop: threading.Event, *, stop_after: int) -> None:
        self.stop = stop
        self.stop_after = stop_after
        self.events: list[object] = []

    def snapshot(self, snapshot: Snapshot) -> None:
        self.events.append(snapshot.status.trusted_time.earliest[-6:-5])
        self._maybe_stop()

    def lost(self, problem: str, hint: str | None) -> None:
        self.events.append(("lost", problem, hint))
        self._maybe_stop()

    def _maybe_stop(self) -> None:
        if len(self.events) >= self.stop_after:
            self.stop.set()


def test_outages_are_reported_and_retried_until_the_engine_answers() -> None:
    """Two failed connections are reported with the engine's words, then data flows."""
    stop = threading.Event()
    record = _Record(stop, stop_after=4)
    source = DownSource(snapshots(2), failures=2)
    follow_feed(source, on_snapshot=record.snapshot, on_lost=record.lost, stop=stop,
                retry_s=0.001)
    lost = ("lost", f"the engine is not running (no answer at {SOCKET}: No such file or "
                    "directory)", "start it with `nereus engine start`")
    assert record.events == [lost, lost, "1", "2"]
    assert source.connects == 3


def test_a_closed_feed_is_an_outage_and_is_reopened() -> None:
    """A feed that ends (engine stopping) is reported and connected again."""

    class Ending(FakeSource):
        def snapshots(self, stop: threading.Event) -> Iterator[Snapshot]:
            self.connects += 1
            yield from self.snapshot_list

    stop = threading.Event()
    record = _Record(stop, stop_after=3)
    source = Ending(snapshots(1))
    follow_feed(source, on_snapshot=record.snapshot, on_lost=record.lost, stop=stop,
                retry_s=0.001)
    assert record.events == ["1", ("lost", f"the engine at {SOCKET} closed the feed", None),
                             "1"]


def test_stop_interrupts_the_pause_between_retries() -> None:
    """Setting stop during a long retry pause ends the loop at once."""
    stop = threading.Event()
    lost = threading.Event()
    thread = threading.Thread(target=follow_feed, kwargs={
        "source": DownSource(), "on_snapshot": lambda s: None,
        "on_lost": lambda p, h: lost.set(), "stop": stop, "retry_s": 3600.0})
    thread.start()
    assert lost.wait(5)
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
