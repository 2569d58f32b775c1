"""Build the configured object store: ``[objects] store = "file"`` (default) or ``"s3"``."""

from __future__ import annotations

from pathlib import Path

from nereus.adapters.backends.objectstore.protocol import ObjectStore
from nereus.config import ObjectSettings


def open_object_store(settings: ObjectSettings, home: Path) -> ObjectStore:
    if settings.store == "s3":
        from nereus.adapters.backends.objectstore.s3 import S3ObjectStore

        assert settings.bucket is not None
        return S3ObjectStore(
            settings.bucket, prefix=settings.prefix, endpoint_url=settings.endpoint,
            region=settings.region, access_key_id=settings.access_key_id,
            secret_access_key=settings.secret_access_key,
        )
    from nereus.adapters.backends.objectstore.local_dir import LocalObjectStore

    root = Path(settings.path) if settings.path else Path("objects")
    return LocalObjectStore(root if root.is_absolute() else home / root)
