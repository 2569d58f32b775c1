"""Where a Nereus home keeps things; one place so every tool agrees.

::

    <home>/nereus.toml                      configuration
    <home>/shardlog/<route>/<partition>/    file Shard Log segments
    <home>/state/<route>/<partition>/       the shard's live RocksDB database
    <home>/outbox/  run/  log/              file destinations; pid and socket; logs
    <home>/coordinator.db                   the embedded coordinator (SQLite, WAL)
    <home>/playbooks/*.toml, journal/       own playbooks; run journals (--resume)
    <home>/batch/                           retry files of batches that stopped part-way

The home directory itself is the engine's lock (``flock``).
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from nereus.shard import ShardId

CONFIG_FILE = "nereus.toml"


class HomeLayout(msgspec.Struct, frozen=True):
    root: Path

    @property
    def config(self) -> Path:
        return self.root / CONFIG_FILE

    def shard_log(self, shard: ShardId) -> Path:
        return self.root / "shardlog" / shard.route / str(shard.partition)

    def shard_state(self, shard: ShardId) -> Path:
        return self.root / "state" / shard.route / str(shard.partition)

    @property
    def outbox(self) -> Path:
        return self.root / "outbox"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def logs(self) -> Path:
        return self.root / "log"

    @property
    def coordinator(self) -> Path:
        return self.root / "coordinator.db"

    @property
    def playbooks(self) -> Path:
        return self.root / "playbooks"

    @property
    def batch_retries(self) -> Path:
        return self.root / "batch"

    def playbook_journal(self, name: str) -> Path:
        return self.root / "playbooks" / "journal" / f"{name}.jsonl"
