#!/usr/bin/env python3
"""Readiness probe for the integration-test servers started by ``scripts/services``.

Usage::

    probe.py kafka  [--timeout S] [--pid PID]   # produce one message, consume it back
    probe.py pulsar [--timeout S] [--pid PID]   # same through the Pulsar binary protocol
    probe.py s3     [--timeout S] [--pid PID]   # put one object, get it back
    probe.py s3 --features                      # also check the S3 calls the tests rely on
    probe.py pulsar --features                  # also check delayed delivery, entry metadata

Each probe retries until one round trip succeeds or the deadline passes; it gives up early
if ``--pid`` is given and that process has died. Exit status 0 means ready. Addresses and
credentials come from the same environment variables that ``scripts/services`` reads.

Needs ``confluent-kafka`` (kafka), ``pulsar-client`` (pulsar) or ``boto3`` (s3) in the
Python that runs it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the clients are imported where used: a probe needs only its own
    import pulsar
    from confluent_kafka import KafkaError, Message

HOST = "127.0.0.1"


def env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def log(msg: str) -> None:
    print(f"probe: {msg}", file=sys.stderr, flush=True)


class ProcessDied(Exception):
    pass


def alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def retry(name: str, attempt: Callable[[float], str], timeout: float, pid: int | None) -> str:
    """Call ``attempt(budget_seconds)`` until it returns, the deadline passes or pid dies."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    tries = 0
    while True:
        if not alive(pid):
            raise ProcessDied(f"{name} server process {pid} exited")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(
                f"{name} not ready after {timeout:.0f}s ({tries} tries); last error: {last!r}"
            )
        tries += 1
        try:
            return attempt(min(remaining, 30.0))
        except Exception as exc:
            last = exc
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


# --------------------------------------------------------------------------------------- kafka


def kafka_round_trip(budget: float) -> str:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    bootstrap = f"{HOST}:{env('NEREUS_KAFKA_PORT', '9092')}"
    topic = "nereus-probe"
    payload = f"probe-{uuid.uuid4()}".encode()
    timeout_ms = max(1000, int(budget * 1000))
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "message.timeout.ms": timeout_ms,
            "socket.connection.setup.timeout.ms": min(timeout_ms, 5000),
            "log_level": 0,
        }
    )
    reports: list[tuple[KafkaError | None, Message]] = []  # the delivery report

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        reports.append((err, msg))

    producer.produce(topic, payload, on_delivery=on_delivery)
    left = producer.flush(budget)
    err = reports[0][0] if reports else None
    if left or err is not None or not reports:
        raise RuntimeError(f"produce failed: {err or 'not delivered in time'}")
    msg = reports[0][1]
    partition, offset = msg.partition(), msg.offset()
    if partition is None or offset is None:
        raise RuntimeError(f"produce failed: delivered to partition {partition} offset {offset}")

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"nereus-probe-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + budget
        while time.monotonic() < deadline:
            got = consumer.poll(0.5)
            if got is None:
                continue
            if got.error():
                raise KafkaException(got.error())
            if got.value() == payload:
                return (
                    f"kafka ok: {bootstrap} topic={topic} partition={partition} "
                    f"offset={offset} round trip"
                )
        raise RuntimeError("produced message not consumed back in time")
    finally:
        consumer.close()


# -------------------------------------------------------------------------------------- pulsar


def _quiet_logger() -> logging.Logger:
    quiet = logging.getLogger("nereus.probe.pulsar-client")
    quiet.setLevel(logging.CRITICAL)
    quiet.propagate = False
    quiet.addHandler(logging.NullHandler())
    return quiet


def pulsar_client(budget: float) -> tuple[str, pulsar.Client]:
    import pulsar

    url = f"pulsar://{HOST}:{env('NEREUS_PULSAR_PORT', '6650')}"
    return url, pulsar.Client(
        url,
        operation_timeout_seconds=max(1, int(budget)),
        connection_timeout_ms=max(1000, min(int(budget * 1000), 10000)),
        # the client logs every refused connection while the broker starts; failures that
        # matter surface as exceptions (and the last one is reported on timeout)
        logger=_quiet_logger(),
    )


def pulsar_round_trip(budget: float) -> str:
    import pulsar

    url, client = pulsar_client(budget)
    topic = "persistent://public/default/nereus-probe"
    payload = f"probe-{uuid.uuid4()}".encode()
    try:
        consumer = client.subscribe(
            topic,
            f"nereus-probe-{uuid.uuid4()}",
            consumer_type=pulsar.ConsumerType.Exclusive,
            initial_position=pulsar.InitialPosition.Latest,
        )
        producer = client.create_producer(topic, send_timeout_millis=max(1000, int(budget * 1000)))
        msg_id = producer.send(payload)
        deadline = time.monotonic() + budget
        while time.monotonic() < deadline:
            try:
                got = consumer.receive(timeout_millis=500)
            except pulsar.Timeout:
                continue
            consumer.acknowledge(got)
            if got.data() == payload:
                consumer.unsubscribe()
                _, clusters = pulsar_http("/admin/v2/clusters", budget)
                return (
                    f"pulsar ok: {url} topic={topic} message_id={msg_id} round trip; "
                    f"admin http clusters={clusters.decode()}"
                )
        raise RuntimeError("produced message not consumed back in time")
    finally:
        client.close()


def pulsar_http(path: str, budget: float) -> tuple[dict[str, str], bytes]:
    import urllib.request

    url = f"http://{HOST}:{env('NEREUS_PULSAR_HTTP_PORT', '8080')}{path}"
    with urllib.request.urlopen(url, timeout=max(1.0, budget)) as resp:
        return dict(resp.headers.items()), resp.read()


def pulsar_features(budget: float) -> str:
    """Delayed delivery is honoured; entries carry broker entry metadata (timestamp + index)."""
    import datetime
    import json

    import pulsar

    _url, client = pulsar_client(budget)
    short = f"nereus-probe-features-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://public/default/{short}"
    out = []
    try:
        # Delayed delivery only applies to Shared (and Key_Shared) subscriptions.
        consumer = client.subscribe(topic, "nereus-probe", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic, batching_enabled=False)
        sent_at = time.monotonic()
        delayed_id = producer.send(b"delayed", deliver_after=datetime.timedelta(seconds=2))
        producer.send(b"now")
        first = consumer.receive(timeout_millis=int(budget * 1000))
        consumer.acknowledge(first)
        second = consumer.receive(timeout_millis=int(budget * 1000))
        waited = time.monotonic() - sent_at
        consumer.acknowledge(second)
        order = [first.data(), second.data()]
        if order != [b"now", b"delayed"] or waited < 1.8:
            raise RuntimeError(f"delayed delivery not honoured: order={order} waited={waited:.2f}s")
        out.append(
            f"delayed delivery ok (deliver_after=2s message came {waited:.2f}s after send, "
            "after the undelayed one)"
        )

        # The Python client has no accessor for broker entry metadata; the admin API shows it.
        headers, _ = pulsar_http(
            f"/admin/v2/persistent/public/default/{short}/ledger/{delayed_id.ledger_id()}/entry/{delayed_id.entry_id()}",
            budget,
        )
        ts = headers.get("X-Pulsar-Broker-Entry-METADATA-timestamp")
        idx = headers.get("X-Pulsar-Broker-Entry-METADATA-index")
        if ts is None or idx is None:
            raise RuntimeError(f"no broker entry metadata on the stored entry: headers={headers}")
        out.append(f"broker entry metadata on entries ok (broker timestamp {ts}, index {idx})")

        _, body = pulsar_http("/admin/v2/brokers/configuration/runtime", budget)
        runtime = json.loads(body)
        keys = (
            "delayedDeliveryEnabled",
            "exposingBrokerEntryMetadataToClientEnabled",
            "brokerEntryMetadataInterceptors",
        )
        out.append("runtime config " + ", ".join(f"{k}={runtime.get(k)}" for k in keys))
        consumer.unsubscribe()
    finally:
        client.close()
    return "pulsar features:\n  " + "\n  ".join(out)


# ------------------------------------------------------------------------------------------ s3


def s3_client(budget: float) -> tuple[str, Any]:  # a boto3 S3 client (boto3 has no types)
    import boto3
    from botocore.config import Config

    endpoint = f"http://{HOST}:{env('NEREUS_S3_PORT', '9000')}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
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


def s3_features(budget: float) -> str:
    from botocore.exceptions import ClientError

    _, client = s3_client(budget)
    bucket = env("NEREUS_S3_PROBE_BUCKET", "nereus-probe")
    s3_ensure_bucket(client, bucket)
    prefix = f"features-{uuid.uuid4().hex[:8]}/"
    results: list[str] = []

    def check(name: str, fn: Callable[[], object]) -> None:
        try:
            detail = fn()
            results.append(f"{name}: ok" + (f" ({detail})" if detail else ""))
        except Exception as exc:
            results.append(f"{name}: FAILED ({exc!r})")

    def put_get() -> str:
        client.put_object(Bucket=bucket, Key=prefix + "a", Body=b"alpha")
        client.put_object(Bucket=bucket, Key=prefix + "b", Body=b"beta")
        assert client.get_object(Bucket=bucket, Key=prefix + "a")["Body"].read() == b"alpha"
        return ""

    def list_v2() -> str:
        keys: list[str] = []
        token = None
        while True:
            kw = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": 1}
            if token:
                kw["ContinuationToken"] = token
            page = client.list_objects_v2(**kw)
            keys += [o["Key"] for o in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                break
            token = page["NextContinuationToken"]
        assert keys == [prefix + "a", prefix + "b"], keys
        return "paged with MaxKeys=1 and continuation tokens"

    def delete() -> str:
        client.delete_object(Bucket=bucket, Key=prefix + "b")
        try:
            client.get_object(Bucket=bucket, Key=prefix + "b")
        except ClientError as exc:
            assert exc.response["Error"]["Code"] in ("NoSuchKey", "404"), exc.response
            return "GET after delete -> NoSuchKey"
        raise AssertionError("object still there after delete")

    def multipart() -> str:
        key = prefix + "mp"
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

    def conditional_create() -> str:
        key = prefix + "cond"
        client.put_object(Bucket=bucket, Key=key, Body=b"first", IfNoneMatch="*")
        try:
            client.put_object(Bucket=bucket, Key=key, Body=b"second", IfNoneMatch="*")
        except ClientError as exc:
            status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
            code = exc.response["Error"]["Code"]
            assert status in (409, 412), exc.response
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            assert body == b"first", body
            return f"second PUT with If-None-Match: * -> HTTP {status} {code}; object unchanged"
        raise AssertionError("second PUT with If-None-Match: * succeeded (not supported)")

    def bad_credentials() -> str:
        import boto3
        from botocore.config import Config

        bad = boto3.client(
            "s3",
            endpoint_url=f"http://{HOST}:{env('NEREUS_S3_PORT', '9000')}",
            aws_access_key_id="nereus",
            aws_secret_access_key="wrong-secret",
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )
        try:
            bad.list_objects_v2(Bucket=bucket)
        except ClientError as exc:
            return f"wrong secret -> {exc.response['Error']['Code']}"
        raise AssertionError("request with a wrong secret was accepted")

    check("PutObject/GetObject", put_get)
    check("ListObjectsV2", list_v2)
    check("DeleteObject", delete)
    check("multipart upload", multipart)
    check("conditional create (If-None-Match: *)", conditional_create)
    check("authorization enforced", bad_credentials)
    # clean up what we made
    for obj in client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []):
        client.delete_object(Bucket=bucket, Key=obj["Key"])
    text = "s3 features:\n  " + "\n  ".join(results)
    if any("FAILED" in r for r in results):
        raise RuntimeError(text)
    return text


PROBES: dict[str, Callable[[float], str]] = {
    "kafka": kafka_round_trip,
    "pulsar": pulsar_round_trip,
    "s3": s3_round_trip,
}
FEATURES: dict[str, Callable[[float], str]] = {
    "pulsar": pulsar_features,
    "s3": s3_features,
}


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("service", choices=sorted(PROBES))
    ap.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to keep trying (default 60)"
    )
    ap.add_argument("--pid", type=int, default=None, help="give up if this process exits")
    ap.add_argument(
        "--features", action="store_true", help="after the round trip, check more features"
    )
    args = ap.parse_args()
    started = time.monotonic()
    try:
        print(retry(args.service, PROBES[args.service], args.timeout, args.pid), flush=True)
        if args.features:
            if args.service not in FEATURES:
                log(f"no feature checks for {args.service}")
            else:
                print(FEATURES[args.service](min(args.timeout, 30.0)), flush=True)
    except ImportError as exc:
        log(f"missing Python client for {args.service}: {exc} (python: {sys.executable})")
        return 3
    except (TimeoutError, ProcessDied, RuntimeError) as exc:
        log(str(exc))
        return 1
    log(f"{args.service} ready after {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
