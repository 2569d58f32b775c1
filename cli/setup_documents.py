"""What the commands that set a home up print with ``--json``, as typed values: ``init``
(and ``init --from HOME``), ``quickstart``, ``doctor`` and ``completion``.

The man pages' JSON sections and ``nereus.cli.json_keys`` are generated from these fields
(``json_keys.typed``), and ``tests/cli/test_typed_documents.py`` holds each command's
output to them. A key that is absent in some cases is ``msgspec.UNSET`` by default, so it
stays absent rather than printed as ``null``.
"""

from __future__ import annotations

import msgspec

from nereus.client import Receipt


class InitRoute(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The route ``init`` wrote: its log, shards and (on a broker) Command Topic."""

    route: str
    log: str
    partitions: int
    command_topic: str | None  # None on the file log
    route_id: str
    attached: bool  # this home took the identity the route's log already held


class InitLane(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    lane: str
    destination: str
    path: str | None  # the outbox file of a file destination


class InitReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``init``: the configuration written, its route, shards and lanes."""

    home: str
    config: str
    routes: list[InitRoute]
    shards: list[str]
    lanes: list[InitLane]


class CopiedRoute(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    route: str
    log: str
    partitions: int


class CopiedLog(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A shard's file Shard Log copied by ``init --from HOME --copy-log``."""

    shard: str
    source: str = msgspec.field(name="from")
    target: str = msgspec.field(name="to")
    segments: int


class InitFromReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``init --from HOME``: HOME's configuration, pointing at HOME's object store."""

    home: str
    config: str
    source: str = msgspec.field(name="from")
    object_store: str  # the file store's absolute path, or s3://BUCKET
    routes: list[CopiedRoute]
    shards: list[str]
    copied_logs: list[CopiedLog]


class PublishedMessage(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A line of the ``local`` lane's outbox (the file destination), and how late it was."""

    delay_message_id: str
    attempt_id: str
    lane: str
    generation: int
    deliver_at: str
    published_at: str
    key: str | None
    headers: dict[str, str]
    payload: str
    mac: str
    payload_encoding: str | msgspec.UnsetType = msgspec.UNSET  # "base64" when not UTF-8
    lateness_ms: int  # published_at - deliver_at


class ReplayCheck(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One shard's log replayed offline from empty, compared with the live state."""

    shard: str
    records: int
    live_digest: str
    replay_digest: str
    match: bool


class QuickstartReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``quickstart``: what was scheduled, cancelled, rescheduled and published, the
    receipts, and every shard's offline replay. ``ok``: everything expected published and
    every replay matched."""

    ok: bool
    home: str
    outbox: str
    engine_log: str
    scheduled: list[str]
    cancelled: str
    rescheduled: str
    published: list[PublishedMessage]
    missing: list[str]
    receipts: list[Receipt]
    replays: list[ReplayCheck]


class DoctorCheck(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One check of ``doctor``. A failed ``warning`` is reported but does not fail it."""

    name: str
    ok: bool
    severity: str  # error | warning
    detail: str
    fix: str | None  # what to do; None when the check passed


class DoctorReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    ok: bool
    home: str
    checks: list[DoctorCheck]


class CompletionScript(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    shell: str
    script: str
