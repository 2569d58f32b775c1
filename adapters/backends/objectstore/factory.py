"""Build the configured object store: ``[objects] store = "file"`` (default) or ``"s3"``."""

from __future__ import annotations

from pathlib import Path

from nereus.adapters.backends.objectstore.protocol import ObjectStore
from nereus.config import ObjectSettings


def open_object_store(settings: ObjectSettings, home: Path) -> ObjectStore:
    if settings.store == "s3":
        from nereus.adapters.backends.objectstore.s3 import S3ObjectStore
        from nereus.adapters.home.secrets import read_secret
        from nereus.adapters.home.tls_files import tls_file

        assert settings.bucket is not None
        secret = settings.secret_access_key or read_secret(
            "[objects] secret_access_key", file=settings.secret_access_key_file,
            env=settings.secret_access_key_env, home=home)
        return S3ObjectStore(
            settings.bucket, prefix=settings.prefix, endpoint_url=settings.endpoint,
            region=settings.region, access_key_id=settings.access_key_id,
            secret_access_key=secret, profile=settings.profile,
            ca_bundle=tls_file("[objects] ca_bundle", settings.ca_bundle, home),
        )
    from nereus.adapters.backends.objectstore.local_dir import LocalObjectStore

    root = Path(settings.path) if settings.path else Path("objects")
    return LocalObjectStore(root if root.is_absolute() else home / root)
