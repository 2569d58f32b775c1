"""The S3 readiness probe (put one object, get it back) and its feature checks: the calls
the tests rely on (listing with continuation, delete, multipart, conditional create) and
that a wrong secret is refused.

Needs ``boto3``, imported where used.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from probe_support import HOST, env


def s3_client(budget: float) -> tuple[str, Any]:  # a boto3 S3 client (boto3 has no types)
    import boto3
    from botocore.config import Config

    # an https endpoint (s3-secure) is checked against the test CA
    endpoint = os.environ.get("NEREUS_S3_PROBE_ENDPOINT") or \
        f"http://{HOST}:{env('NEREUS_S3_PORT', '9000')}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        verify=os.environ.get("NEREUS_S3_PROBE_CA") if endpoint.startswith("https") else None,
        aws_access_key_id=env("NEREUS_S3_ACCESS_KEY", "nereus"),
        aws_secret_access_key=env("NEREUS_S3_SECRET_KEY", "nereus-secret"),
        region_name="us-east-1",
        config=Config(
            s3={"addressing_style": "path"},
            connect_timeout=min(budget, 5),
            read_timeout=max(1, budget),
            retries={"max_attempts": 1},
        ),
    )
    return endpoint, client


def s3_ensure_bucket(client: Any, bucket: str) -> None:
    from botocore.exceptions import ClientError

    try:
        client.head_bucket(Bucket=bucket)
    except ClientError:
        client.create_bucket(Bucket=bucket)


def s3_round_trip(budget: float) -> str:
    endpoint, client = s3_client(budget)
    bucket = env("NEREUS_S3_PROBE_BUCKET", "nereus-probe")
    s3_ensure_bucket(client, bucket)
    key = "probe/ready"
    payload = f"probe-{uuid.uuid4()}".encode()
    client.put_object(Bucket=bucket, Key=key, Body=payload)
    got = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    if got != payload:
        raise RuntimeError(f"read back {got!r}, wrote {payload!r}")
    return f"s3 ok: {endpoint} bucket={bucket} put/get round trip"


@dataclass(frozen=True)
class Scratch:
    """Where the feature checks work: a client, the probe bucket, a fresh key prefix."""

    client: Any  # a boto3 S3 client (boto3 has no types)
    bucket: str
    prefix: str


def put_get(s: Scratch) -> str:
    s.client.put_object(Bucket=s.bucket, Key=s.prefix + "a", Body=b"alpha")
    s.client.put_object(Bucket=s.bucket, Key=s.prefix + "b", Body=b"beta")
    assert s.client.get_object(Bucket=s.bucket, Key=s.prefix + "a")["Body"].read() == b"alpha"
    return ""


def list_v2(s: Scratch) -> str:
    keys: list[str] = []
    token = None
    while True:
        kw = {"Bucket": s.bucket, "Prefix": s.prefix, "MaxKeys": 1}
        if token:
            kw["ContinuationToken"] = token
        page = s.client.list_objects_v2(**kw)
        keys += [o["Key"] for o in page.get("Contents", [])]
        if not page.get("IsTruncated"):
            break
        token = page["NextContinuationToken"]
    assert keys == [s.prefix + "a", s.prefix + "b"], keys
    return "paged with MaxKeys=1 and continuation tokens"


def delete(s: Scratch) -> str:
    from botocore.exceptions import ClientError

    s.client.delete_object(Bucket=s.bucket, Key=s.prefix + "b")
    try:
        s.client.get_object(Bucket=s.bucket, Key=s.prefix + "b")
    except ClientError as exc:
        assert exc.response["Error"]["Code"] in ("NoSuchKey", "404"), exc.response
        return "GET after delete -> NoSuchKey"
    raise AssertionError("object still there after delete")


def multipart(s: Scratch) -> str:
    client, bucket = s.client, s.bucket
    key = s.prefix + "mp"
    part1 = b"x" * (5 * 1024 * 1024)
    part2 = b"tail"
    up = client.create_multipart_upload(Bucket=bucket, Key=key)
    uid = up["UploadId"]
    e1 = client.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=1, Body=part1)[
        "ETag"
    ]
    e2 = client.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=2, Body=part2)[
        "ETag"
    ]
    client.complete_multipart_upload(
        Bucket=bucket,
        Key=key,
        UploadId=uid,
        MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]
        },
    )
    body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert body == part1 + part2, len(body)
    # abort path too
    up2 = client.create_multipart_upload(Bucket=bucket, Key=key + "-aborted")
    client.abort_multipart_upload(Bucket=bucket, Key=key + "-aborted", UploadId=up2["UploadId"])
    return "2 parts (5 MiB + 4 B) completed and read back; abort ok"


def conditional_create(s: Scratch) -> str:
    from botocore.exceptions import ClientError

    key = s.prefix + "cond"
    s.client.put_object(Bucket=s.bucket, Key=key, Body=b"first", IfNoneMatch="*")
    try:
        s.client.put_object(Bucket=s.bucket, Key=key, Body=b"second", IfNoneMatch="*")
    except ClientError as exc:
        status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
        code = exc.response["Error"]["Code"]
        assert status in (409, 412), exc.response
        body = s.client.get_object(Bucket=s.bucket, Key=key)["Body"].read()
        assert body == b"first", body
        return f"second PUT with If-None-Match: * -> HTTP {status} {code}; object unchanged"
    raise AssertionError("second PUT with If-None-Match: * succeeded (not supported)")


def bad_credentials(s: Scratch) -> str:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError

    bad = boto3.client(
        "s3",
        endpoint_url=f"http://{HOST}:{env('NEREUS_S3_PORT', '9000')}",
        aws_access_key_id="nereus",
        aws_secret_access_key="wrong-secret",
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    try:
        bad.list_objects_v2(Bucket=s.bucket)
    except ClientError as exc:
        return f"wrong secret -> {exc.response['Error']['Code']}"
    raise AssertionError("request with a wrong secret was accepted")


# in this order: each check may rely on what the ones before it left
CHECKS: tuple[tuple[str, Callable[[Scratch], str]], ...] = (
    ("PutObject/GetObject", put_get),
    ("ListObjectsV2", list_v2),
    ("DeleteObject", delete),
    ("multipart upload", multipart),
    ("conditional create (If-None-Match: *)", conditional_create),
    ("authorization enforced", bad_credentials),
)


def check(name: str, fn: Callable[[Scratch], str], scratch: Scratch) -> str:
    """One result line: ``name: ok`` (with what it showed) or ``name: FAILED (why)``."""
    try:
        detail = fn(scratch)
        return f"{name}: ok" + (f" ({detail})" if detail else "")
    except Exception as exc:
        return f"{name}: FAILED ({exc!r})"


def s3_features(budget: float) -> str:
    _, client = s3_client(budget)
    bucket = env("NEREUS_S3_PROBE_BUCKET", "nereus-probe")
    s3_ensure_bucket(client, bucket)
    scratch = Scratch(client, bucket, f"features-{uuid.uuid4().hex[:8]}/")
    results = [check(name, fn, scratch) for name, fn in CHECKS]
    # clean up what we made
    for obj in client.list_objects_v2(Bucket=bucket, Prefix=scratch.prefix).get("Contents", []):
        client.delete_object(Bucket=bucket, Key=obj["Key"])
    text = "s3 features:\n  " + "\n  ".join(results)
    if any("FAILED" in r for r in results):
        raise RuntimeError(text)
    return text
