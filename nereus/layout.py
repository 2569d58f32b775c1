"""Where a Nereus home keeps things; one place so every tool agrees.

::

    <home>/nereus.toml                      configuration
    <home>/shardlog/<route>/<partition>/    file Shard Log segments (embedded default)
    <home>/state/<route>/<partition>/       the shard's live RocksDB database
    <home>/outbox/                          file destinations (lane ``local``)
    <home>/run/                             engine pid file and admin socket (the lock is the home)
    <home>/log/                             engine logs
    <home>/coordinator.db                   the embedded coordinator (SQLite, WAL mode)
    <home>/playbooks/*.toml                 the operator's own playbooks (shadow shipped ones)
    <home>/playbooks/journal/<name>.jsonl   playbook run journals (``--resume`` reads them)
    <home>/batch/                           retry files of batches that stopped part-way
                                            (``--batch -``, or a file whose folder is read-only)
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
