"""``[objects]`` and ``[checkpoints]``: where checkpoints and large payloads live
(``ObjectSettings``) and when the engine takes checkpoints (``CheckpointSettings``)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from nereus.config.fields import NonNegative, Positive


class ObjectSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[objects]``: where checkpoints and large payloads live."""

    store: Literal["file", "s3"] = "file"  # file (<home>/objects, or path) | s3
    path: str | None = None
    bucket: str | None = None
    prefix: str = ""
    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    # the secret key: a file 0600 or an environment variable (nereus.config.connections);
    # written inline it still works, and `doctor` warns; unset, boto3's own chain answers
    # (AWS_* environment, ~/.aws profiles, instance roles)
    secret_access_key: str | None = None
    secret_access_key_file: str | None = None
    secret_access_key_env: str | None = None
    profile: str | None = None  # a profile of ~/.aws/credentials (AWS_SHARED_CREDENTIALS_FILE)
    ca_bundle: str | None = None  # PEM file of the CAs that sign an https endpoint's certificate


class CheckpointSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[checkpoints]``: when the engine takes them and how many recovery may use."""

    every_records: NonNegative = 100_000  # 0 = not by record count
    every_seconds: NonNegative = 3_600  # 0 = not by time
    # the share of an engine process's time its shards' due checkpoints may take together:
    # after one that took D seconds, the process's next due one (by every_records or
    # every_seconds, on any of its shards) waits until D / max_share after the last began,
    # one at a time. A checkpoint copies and hashes the whole state, so without this a
    # backlog filling fast took one every_records, each longer than the last (1 = no wait;
    # a requested checkpoint never waits). A restore may then replay more than every_records:
    # what arrived while its shard waited
    max_share: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.05
    keep: Positive = 3  # the Recovery Set: the newest `keep` catalogued checkpoints
    prune_log: bool = False  # delete log segments wholly below the Recovery Floor
