"""The checkpoint manifest (``manifest.json``), format version 2 (1 is still read).

A checkpoint is a RocksDB checkpoint directory taken between two applied batches plus this
manifest, stored together under ``checkpoints/<route>/<partition>/<checkpoint id>/`` so a
copied directory verifies on its own (``nereus checkpoint verify --path DIR``). Fields:

* ``checkpoint_id``, ``route``, ``partition``, ``schema_version`` — shard identity;
* ``applied_position`` (last applied Shard Log position, or null) and ``records_applied``;
* ``digest`` — the state digest of the replicated state (``nereus.state.digest``): state
  digest v2 (range digests combined) in a format 2 manifest, v1 (one SHA-256 stream) in a
  format 1 manifest;
* ``files`` — every file of the directory with size and checksum: BLAKE3 (``blake3``) in
  a format 2 manifest, SHA-256 (``sha256``) in format 1;
* ``external_objects`` — object-store keys the state references (large payloads);
* ``parent`` — the previous checkpoint of the shard, if any; ``created_at`` (ISO-8601 UTC).

The catalog entry (``catalog/<route>/<partition>/<checkpoint id>.json``) is written last,
with a conditional create: a checkpoint is only "there" once its catalog entry exists, so
an upload killed half-way leaves nothing that points at an incomplete checkpoint. Its
``digest_version`` says which state digest ``digest`` is (absent, so 1, in entries written
before format 2), so a digest can be compared with a catalogued checkpoint's without
fetching its manifest.

Format 1 checkpoints stay verifiable (their v1 digest is recomputed);
``nereus.checkpoint.verify.upgrade_manifest`` verifies one and rewrites its manifest as
format 2.
"""

from __future__ import annotations

import msgspec

FORMAT = "nereus-checkpoint"
FORMAT_VERSION = 2
FORMAT_VERSIONS = (1, 2)  # what this build reads
# the state digest version a manifest of each format carries (nereus.state.digest)
DIGEST_VERSION_OF_FORMAT = {1: 1, 2: 2}
MANIFEST_NAME = "manifest.json"


# the checksum each format lists for a file (a FileEntry field), and its name in reports
FILE_HASH_OF_FORMAT = {1: "sha256", 2: "blake3"}
FILE_HASH_NAMES = {"sha256": "SHA-256", "blake3": "BLAKE3"}


class FileEntry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One file of the checkpoint: its size and checksum (``sha256`` in format 1,
    ``blake3`` in format 2, the other absent)."""

    name: str
    size: int
    sha256: str | None = None
    blake3: str | None = None

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
