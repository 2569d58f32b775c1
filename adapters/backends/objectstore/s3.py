"""The S3 object store (boto3): any S3-compatible server.

Endpoint, region and credentials come from ``[objects]`` in nereus.toml (the secret key by
``secret_access_key_file`` / ``_env``, or a ``profile``), or the usual AWS environment
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``...); an https
endpoint's certificate is checked against ``ca_bundle`` when given.
Large files go up in multipart uploads (``multipart_threshold``). Each object's SHA-256
travels as user metadata (``x-amz-meta-sha256``) and is verified on every read.
``create_if_absent`` is a conditional PUT (``If-None-Match: *``): the server answers 412 to
the second writer. Connection failures raise ``ServiceUnreachable`` (exit 5).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nereus.adapters.backends.objectstore.local_dir import file_sha256
from nereus.adapters.backends.objectstore.protocol import (
    ObjectCorrupt,
    ObjectInfo,
    ObjectMissing,
    check_key,
)
from nereus.errors import NereusError, NotFound, ServiceUnreachable

# S3 error codes that say the credentials or permissions are wrong ("403": a HEAD's answer)
_REFUSED = frozenset({"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"})


class S3ObjectStore:
    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "",
        endpoint_url: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        multipart_threshold: int = 8 << 20,
        create_bucket: bool = False,
        profile: str | None = None,
        ca_bundle: str | None = None,
    ) -> None:
        import boto3
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.description = f"s3://{bucket}/{self.prefix}" + (
            f" at {endpoint_url}" if endpoint_url else "")
        # a profile of ~/.aws/credentials, else the keys given, else boto3's own chain
        session = boto3.Session(profile_name=profile) if profile else boto3
        self._client: Any = session.client(
            "s3", endpoint_url=endpoint_url, region_name=region or "us-east-1",
            aws_access_key_id=access_key_id, aws_secret_access_key=secret_access_key,
            verify=ca_bundle,  # an https endpoint's certificate: this CA bundle, else certifi's
            config=Config(s3={"addressing_style": "path"}, connect_timeout=5, read_timeout=60,
                          retries={"max_attempts": 4, "mode": "standard"}),
        )
        from boto3.s3.transfer import TransferConfig

        self._transfer = TransferConfig(multipart_threshold=multipart_threshold,
                                        multipart_chunksize=max(multipart_threshold, 5 << 20))
        if create_bucket:
            self._call(self._ensure_bucket)

    def _ensure_bucket(self) -> None:
        from botocore.exceptions import ClientError

        try:
            self._client.head_bucket(Bucket=self.bucket)
        except ClientError:
            self._client.create_bucket(Bucket=self.bucket)

    def _key(self, key: str) -> str:
        return self.prefix + check_key(key)

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call boto3; connection failures become ServiceUnreachable, and the answers that
        mean the ``[objects]`` settings are wrong (no bucket, refused credentials) become
        errors naming the store. Other ClientErrors pass through for the caller to read."""
        from boto3.exceptions import S3UploadFailedError
        from botocore.exceptions import (
            ClientError,
            ConnectionClosedError,
            EndpointConnectionError,
            ReadTimeoutError,
            SSLError,
        )
        from botocore.exceptions import ConnectionError as BotoConnectionError

        try:
            return fn(*args, **kwargs)
        except SSLError as exc:
            raise ServiceUnreachable(f"object store {self.description} failed TLS: {exc}",
                                     hint="check [objects] ca_bundle (the CA that signed the "
                                          "endpoint's certificate) and that it has not "
                                          "expired") from None
        except (EndpointConnectionError, BotoConnectionError, ConnectionClosedError,
                ReadTimeoutError) as exc:
            raise ServiceUnreachable(f"object store {self.description} is unreachable: {exc}",
                                     hint="check [objects] endpoint in nereus.toml") from None
        except ClientError as exc:
            code = self._code(exc)
            if code == "NoSuchBucket":
                raise NotFound(f"object store {self.description}: no bucket {self.bucket}",
                               hint="create it, or fix [objects] bucket in nereus.toml") from None
            if code in _REFUSED:  # the credentials are wrong: exit 5 like a refused broker
                raise ServiceUnreachable(
                    f"object store {self.description} refused the request ({code}): {exc}",
                    hint="check [objects] access_key_id and the secret key "
                         "(secret_access_key_file, _env or profile) and the bucket's "
                         "permissions") from None
            raise
        except S3UploadFailedError as exc:
            raise NereusError(f"upload to object store {self.description} failed: {exc}",
                              hint="check [objects] bucket and credentials in nereus.toml"
                              ) from None

    @staticmethod
    def _code(exc: Any) -> str:
        return str(exc.response.get("Error", {}).get("Code", ""))

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        sha = hashlib.sha256(data).hexdigest()
        self._call(self._client.put_object, Bucket=self.bucket, Key=self._key(key), Body=data,
                   Metadata={"sha256": sha})
        return ObjectInfo(key, len(data), sha)

    def put_file(self, key: str, path: Path) -> ObjectInfo:
        size, sha = file_sha256(path)
        self._call(self._client.upload_file, str(path), self.bucket, self._key(key),
                   ExtraArgs={"Metadata": {"sha256": sha}}, Config=self._transfer)
        return ObjectInfo(key, size, sha)

    def create_if_absent(self, key: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError

        sha = hashlib.sha256(data).hexdigest()
        try:
            self._call(self._client.put_object, Bucket=self.bucket, Key=self._key(key),
                       Body=data, Metadata={"sha256": sha}, IfNoneMatch="*")
        except ClientError as exc:
            if self._code(exc) in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
                return False
            raise
        return True

    def _verify(self, key: str, data_sha: str, expected: str | None) -> None:
        if expected is not None and expected != data_sha:
            raise ObjectCorrupt(f"object {key} in {self.description} does not match its "
                                f"recorded SHA-256 {expected[:16]}..")

    def get_bytes(self, key: str) -> bytes:
        from botocore.exceptions import ClientError

        try:
            answer = self._call(self._client.get_object, Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if self._code(exc) in ("NoSuchKey", "404"):
                raise ObjectMissing(f"no object {key} in {self.description}") from None
            raise
        data: bytes = self._call(answer["Body"].read)
        expected = answer.get("Metadata", {}).get("sha256")
        self._verify(key, hashlib.sha256(data).hexdigest(), expected)
        return data

    def get_file(self, key: str, dest: Path) -> ObjectInfo:
        info = self.head(key)
        if info is None:
            raise ObjectMissing(f"no object {key} in {self.description}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        self._call(self._client.download_file, self.bucket, self._key(key), str(dest),
                   Config=self._transfer)
        size, sha = file_sha256(dest)
        self._verify(key, sha, info.sha256)
        return ObjectInfo(key, size, sha)

    def head(self, key: str) -> ObjectInfo | None:
        from botocore.exceptions import ClientError

        try:
            answer = self._call(self._client.head_object, Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if self._code(exc) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        return ObjectInfo(key, int(answer["ContentLength"]),
                          answer.get("Metadata", {}).get("sha256"))

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        paginator = self._client.get_paginator("list_objects_v2")
        pages = self._call(lambda: list(paginator.paginate(Bucket=self.bucket,
                                                           Prefix=self.prefix + prefix)))
        for page in pages:
            for item in page.get("Contents", []):
                key = item["Key"][len(self.prefix):]
                yield ObjectInfo(key, int(item["Size"]), None)

    def delete(self, key: str) -> None:
        self._call(self._client.delete_object, Bucket=self.bucket, Key=self._key(key))
