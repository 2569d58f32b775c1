"""The checkpoint manifest (``manifest.json``), format version 1.

A checkpoint is a RocksDB checkpoint directory taken between two applied batches plus this
manifest, stored together under ``checkpoints/<route>/<partition>/<checkpoint id>/`` so a
copied directory verifies on its own (``nereus checkpoint verify --path DIR``). Fields:

* ``checkpoint_id``, ``route``, ``partition``, ``schema_version`` — shard identity;
* ``applied_position`` (last applied Shard Log position, or null) and ``records_applied``;
* ``digest`` — the state digest of the replicated state (``nereus.state.digest``);
* ``files`` — every file of the directory with size and SHA-256;
* ``external_objects`` — object-store keys the state references (large payloads);
* ``parent`` — the previous checkpoint of the shard, if any; ``created_at`` (ISO-8601 UTC).

The catalog entry (``catalog/<route>/<partition>/<checkpoint id>.json``) is written last,
with a conditional create: a checkpoint is only "there" once its catalog entry exists, so
an upload killed half-way leaves nothing that points at an incomplete checkpoint.
"""

from __future__ import annotations

import msgspec

FORMAT = "nereus-checkpoint"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"


class FileEntry(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    size: int
    sha256: str


class Manifest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    format: str = FORMAT
    format_version: int = FORMAT_VERSION
    checkpoint_id: str
    route: str
    partition: int
    schema_version: int
    applied_position: int | None
    records_applied: int
    digest: str
    files: list[FileEntry]
    external_objects: list[str] = msgspec.field(default_factory=list)
    parent: str | None = None
    created_at: str
    created_at_ms: int

    @property
    def shard(self) -> str:
        return f"{self.route}/{self.partition}"


class CatalogEntry(msgspec.Struct, frozen=True, kw_only=True):
    """What the catalog records about a checkpoint that finished uploading."""

    checkpoint_id: str
    route: str
    partition: int
    applied_position: int | None
    digest: str
    manifest_key: str
    created_at: str
    created_at_ms: int


def encode_json(value: object) -> bytes:
    return msgspec.json.format(msgspec.json.encode(value), indent=2) + b"\n"


def checkpoint_prefix(route: str, partition: int, checkpoint_id: str) -> str:
    return f"checkpoints/{route}/{partition}/{checkpoint_id}/"


def catalog_key(route: str, partition: int, checkpoint_id: str) -> str:
    return f"catalog/{route}/{partition}/{checkpoint_id}.json"


def catalog_prefix(route: str, partition: int) -> str:
    return f"catalog/{route}/{partition}/"
