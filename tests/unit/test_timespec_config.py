"""Operator input parsing: times, durations, shard names and nereus.toml validation."""

from __future__ import annotations

import pytest

from nereus.config import parse_config
from nereus.config_template import render_config
from nereus.errors import ConfigError, UsageError
from nereus.shard import ShardId, partition_for
from nereus.timespec import format_time_ms, parse_duration_ms, parse_time_ms


def test_times_accept_iso_with_zone_and_epoch_ms() -> None:
    """ISO-8601 with Z or an offset, and epoch milliseconds, all give epoch ms UTC."""
    assert parse_time_ms("2026-11-29T20:00:00Z") == 1_795_982_400_000
    assert parse_time_ms("2026-11-29T21:00:00+01:00") == 1_795_982_400_000
    assert parse_time_ms("1795982400000") == 1_795_982_400_000
    assert format_time_ms(1_795_982_400_123) == "2026-11-29T20:00:00.123Z"


@pytest.mark.parametrize("text", ["2026-11-29T20:00:00", "tomorrow", "", "12:00"])
def test_naive_or_unreadable_times_are_refused(text: str) -> None:
    """A time without a zone, or not a time at all, is a usage error."""
    with pytest.raises(UsageError):
        parse_time_ms(text)


@pytest.mark.parametrize(("text", "ms"), [("500ms", 500), ("30s", 30_000), ("5m", 300_000),
                                          ("2h", 7_200_000), ("1d", 86_400_000),
                                          ("1h30m", 5_400_000)])
def test_durations(text: str, ms: int) -> None:
    """Durations are a number and a unit, optionally combined."""
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["5", "5 m", "m5", "1w", "", "-5s"])
def test_bad_durations_are_refused(text: str) -> None:
    """Anything else is a usage error naming the accepted forms."""
    with pytest.raises(UsageError, match="not a duration"):
        parse_duration_ms(text)


def test_shard_names() -> None:
    """ROUTE/PARTITION and a bare partition (default route) parse; junk does not."""
    assert ShardId.parse("default/3") == ShardId("default", 3)
    assert ShardId.parse("2") == ShardId("default", 2)
    assert str(ShardId("orders", 1)) == "orders/1"
    with pytest.raises(UsageError):
        ShardId.parse("default/x")


def test_partitioning_is_stable() -> None:
    """The partition of an id never changes between runs or machines (a pinned value)."""
    # blake2b-64 of the UTF-8 id, big-endian, modulo the partition count
    assert [partition_for(f"id-{n}", 8) for n in range(6)] == [0, 2, 0, 0, 2, 5]
    assert partition_for("order-1", 1) == 0
    assert len({partition_for(f"id-{n}", 4) for n in range(200)}) == 4


def test_the_written_config_parses() -> None:
    """What init writes is valid and has lane local on the file outbox."""
    config = parse_config(render_config(route="default", partitions=4, log="file",
                                        route_id="0123abcd"))
    assert config.routes["default"].partitions == 4
    assert config.lanes["local"].path == "outbox/local.jsonl"


@pytest.mark.parametrize(("text", "where"), [
    ("[routes.default]\nlog = \"file\"\npartitions = 0\n", "nereus.toml:3"),
    ("[routes.default]\nlog = \"zookeeper\"\n", "nereus.toml:2"),
    ("[lanes.local]\ndestination = \"file\"\npth = \"x\"\n", "nereus.toml:3"),
    ("[lanes.local]\ndestination = \"file\"\n", "nereus.toml:1"),
    ("[routes.default\n", "line 1"),
    ("[shard]\nmax_inline_payload_bytes = -1\n", "nereus.toml:2"),
])
def test_config_errors_name_file_and_line(text: str, where: str) -> None:
    """Invalid settings are errors that name the file and the line, not silent defaults."""
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="nereus.toml")
    assert where in info.value.message
