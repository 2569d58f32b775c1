"""The checkpoint manifest (``manifest.json``), format version 2 (1 is still read; 3 is
an incremental checkpoint's, written from feature level 2).

A checkpoint is a RocksDB checkpoint directory taken between two applied batches plus this
manifest, under ``checkpoints/<route>/<partition>/<id>/``, so a copied directory verifies on
its own. Fields: shard identity (``checkpoint_id``, ``route``, ``partition``,
``schema_version``), ``applied_position`` and ``records_applied``, the state ``digest`` (v2
in format 2, v1 in format 1), ``files`` with size and checksum (BLAKE3 in format 2, SHA-256
in 1), ``external_objects`` (large payloads the state references), ``parent`` and
``created_at``. The catalog entry (``catalog/<route>/<partition>/<id>.json``) is created last
and conditionally, so a killed upload leaves nothing pointing at an incomplete checkpoint;
its ``digest_version`` (1 when absent) says which digest it carries. ``verify.upgrade_manifest``
rewrites a verified format 1 manifest as format 2.

Format 3 (incremental): format 2, and a file may be held by an earlier checkpoint of the
shard: its entry names that checkpoint (``checkpoint``), whose prefix holds the object
(RocksDB table files are immutable, so an unchanged file is uploaded once). The manifest
still names every file its image needs, its own and its parents', so it verifies and
restores on its own (``file_key``); ``nereus.checkpoint.incremental`` decides the sharing.
"""

from __future__ import annotations

import msgspec

FORMAT = "nereus-checkpoint"
FORMAT_VERSION = 2  # a full checkpoint's
INCREMENTAL_FORMAT_VERSION = 3  # a checkpoint sharing files with earlier ones (level 2)
FORMAT_VERSIONS = (1, 2, 3)  # what this build reads
# the state digest version a manifest of each format carries (nereus.state.digest)
DIGEST_VERSION_OF_FORMAT = {1: 1, 2: 2, 3: 2}
MANIFEST_NAME = "manifest.json"


# the checksum each format lists for a file (a FileEntry field), and its name in reports
FILE_HASH_OF_FORMAT = {1: "sha256", 2: "blake3", 3: "blake3"}
FILE_HASH_NAMES = {"sha256": "SHA-256", "blake3": "BLAKE3"}


class FileEntry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One file of the checkpoint: its size and checksum (``sha256`` in format 1,
    ``blake3`` from format 2, the other absent); ``checkpoint`` (format 3) names the earlier
    checkpoint of the shard whose prefix holds it, absent when this one uploaded it."""

    name: str
    size: int
    sha256: str | None = None
    blake3: str | None = None
    checkpoint: str | None = None

    def checksum(self, algorithm: str) -> str | None:
        value: str | None = getattr(self, algorithm)
        return value


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

    @property
    def digest_version(self) -> int:
        """Which state digest ``digest`` is (by the manifest's format version)."""
        return DIGEST_VERSION_OF_FORMAT[self.format_version]

    @property
    def file_hash(self) -> str:
        """Which checksum ``files`` lists (by the manifest's format version)."""
        return FILE_HASH_OF_FORMAT[self.format_version]

    def file_key(self, entry: FileEntry) -> str:
        """The object key of one of its files: under the prefix of the checkpoint that
        holds it (its own unless ``entry.checkpoint`` names an earlier one)."""
        holder = entry.checkpoint or self.checkpoint_id
        return checkpoint_prefix(self.route, self.partition, holder) + entry.name

    def object_keys(self) -> frozenset[str]:
        """Every object its image needs: each file's, wherever held, and its manifest."""
        own = checkpoint_prefix(self.route, self.partition, self.checkpoint_id)
        return frozenset({own + MANIFEST_NAME, *(self.file_key(f) for f in self.files)})


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
    digest_version: int = 1


def encode_json(value: object) -> bytes:
    return msgspec.json.format(msgspec.json.encode(value), indent=2) + b"\n"


def checkpoint_prefix(route: str, partition: int, checkpoint_id: str) -> str:
    return f"checkpoints/{route}/{partition}/{checkpoint_id}/"


def catalog_key(route: str, partition: int, checkpoint_id: str) -> str:
    return f"catalog/{route}/{partition}/{checkpoint_id}.json"


def catalog_prefix(route: str, partition: int) -> str:
    return f"catalog/{route}/{partition}/"
