"""How often an engine process takes due checkpoints: its shards' due checkpoints together
take at most ``[checkpoints] max_share`` of the time.

A checkpoint copies, hashes and digests a shard's whole state, so its cost grows with the
state. After a due checkpoint (by ``every_records`` or ``every_seconds``; a requested one
never waits) that took D seconds from its snapshot to its catalogue entry, no shard of the
process takes the next due one until D / max_share after that one began, and only one is
in flight at a time. One ``Pacing`` belongs to the process's ``Checkpointer`` and every
shard loop of the process asks it: paced per shard, a process of sixteen shards could spend
sixteen times the share (and did, filling a backlog on four shards: back to back
checkpoints every 100,000 records took the cores from the apply). A shard that waits
replays more on a restore: what arrived meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Pacing:
    """When the process's next due checkpoint may be taken.

    ``claim`` is called on a loop's thread as a due checkpoint is about to be snapshotted:
    it succeeds for one loop at a time, when the last one ended and its pause is over.
    ``ended`` is called by that checkpoint's Future callback (on the checkpointer's thread)
    once it is catalogued or failed, or by the loop if the snapshot failed."""

    def __init__(self, max_share: float, monotonic: Callable[[], float]) -> None:
        self._max_share = max_share
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._began = 0.0
        self._not_before = 0.0
        self._busy = False

    def ready(self) -> bool:
        """No due checkpoint in flight, and the last one's pause is over."""
        return not self._busy and self._monotonic() >= self._not_before

    def claim(self) -> bool:
        """Begin a due checkpoint if ``ready``; False when another loop has one, or the
        pause is not over."""
        with self._lock:
            if not self.ready():
                return False
            self._busy = True
            self._began = self._monotonic()
            return True

    def ended(self, _done: object = None) -> None:
        with self._lock:
            took = self._monotonic() - self._began
            self._not_before = self._began + took / self._max_share
            self._busy = False
