"""The S3 object store passes the ObjectStore contract against a real S3 server.

The server is S3Proxy, started by ``scripts/services up s3`` through the session fixture
in ``tests/integration/services.py``. If it cannot be started (no Java, no Maven to fetch
the jars) these tests fail and say why; they never skip, since a mock is never the only
test of an adapter. Every test gets a fresh bucket, removed afterwards.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nereus.adapters.backends.objectstore.protocol import ObjectStore
from nereus.adapters.backends.objectstore.s3 import S3ObjectStore
from nereus.errors import ExitCode, NereusError, NotFound, ServiceUnreachable
from tests.conftest import CliResult
from tests.integration.objectstore_contract import ObjectStoreContract
from tests.integration.services import S3Endpoint, S3Service, s3_service

__all__ = ["s3_service"]  # the session fixture, imported so pytest finds it here

PREFIX = "tenant-a"  # every store writes under a prefix, so prefix handling is exercised


class TestS3ObjectStore(ObjectStoreContract):
    @pytest.fixture(autouse=True)
    def _fresh_buckets(self, s3_service: S3Service) -> Iterator[None]:
        """Hand the session's server to ``make_store``; remove the buckets it made."""
        self.service = s3_service
        self.buckets: list[tuple[S3Endpoint, str]] = []
        yield
        for endpoint, bucket in self.buckets:
            endpoint.remove_bucket(bucket)

    def make_store(self, tmp_path: Path) -> ObjectStore:
        endpoint = self.service.require()
        bucket = f"nereus-test-{uuid.uuid4().hex[:16]}"
        store = S3ObjectStore(
            bucket, prefix=PREFIX, endpoint_url=endpoint.endpoint_url, region=endpoint.region,
            access_key_id=endpoint.access_key_id, secret_access_key=endpoint.secret_access_key,
            create_bucket=True,
        )
        self.buckets.append((endpoint, bucket))
        return store

    def corrupt(self, store: ObjectStore, key: str) -> None:
        """Overwrite the object's bytes with boto3 directly, keeping its old ``sha256``."""
        assert isinstance(store, S3ObjectStore)
        client = self.service.require().client()
        full_key = store.prefix + key
        old = client.head_object(Bucket=store.bucket, Key=full_key)
        sha = old["Metadata"]["sha256"]
        body = client.get_object(Bucket=store.bucket, Key=full_key)["Body"].read()
        damaged = bytes([body[0] ^ 0xFF]) + body[1:]
        client.put_object(Bucket=store.bucket, Key=full_key, Body=damaged,
                          Metadata={"sha256": sha})
        again = client.head_object(Bucket=store.bucket, Key=full_key)
        assert again["Metadata"]["sha256"] == sha and again["ContentLength"] == len(body)

    def test_objects_live_under_the_prefix_with_their_sha256(self, tmp_path: Path) -> None:
        """In the bucket an object sits at ``<prefix>/<key>`` with ``x-amz-meta-sha256``."""
        store = self.make_store(tmp_path)
        assert isinstance(store, S3ObjectStore)
        info = store.put_bytes("cp/one", b"payload")
        client = self.service.require().client()
        listed = client.list_objects_v2(Bucket=store.bucket)["Contents"]
        assert [item["Key"] for item in listed] == [f"{PREFIX}/cp/one"]
        head = client.head_object(Bucket=store.bucket, Key=f"{PREFIX}/cp/one")
        assert head["Metadata"] == {"sha256": info.sha256}

    def test_a_missing_bucket_is_not_found(self, tmp_path: Path) -> None:
        """Without ``create_bucket``, a bucket that does not exist is NotFound (exit 3)
        naming the bucket, for reads, writes and listing alike; never a botocore trace."""
        endpoint = self.service.require()
        store = S3ObjectStore(
            f"nereus-absent-{uuid.uuid4().hex[:12]}", endpoint_url=endpoint.endpoint_url,
            region=endpoint.region, access_key_id=endpoint.access_key_id,
            secret_access_key=endpoint.secret_access_key,
        )
        for call in (lambda: store.get_bytes("k"), lambda: store.put_bytes("k", b"x"),
                     lambda: list(store.list(""))):
            with pytest.raises(NotFound, match=f"no bucket {store.bucket}") as caught:
                call()
            assert caught.value.exit_code == ExitCode.NOT_FOUND

    def test_refused_credentials_name_the_store(self, tmp_path: Path) -> None:
        """A wrong secret is a NereusError naming the store and the server's code, with a
        hint at the ``[objects]`` credentials (file uploads included)."""
        good = self.make_store(tmp_path)
        assert isinstance(good, S3ObjectStore)
        good.put_bytes("k", b"x")
        endpoint = self.service.require()
        store = S3ObjectStore(
            good.bucket, prefix=PREFIX, endpoint_url=endpoint.endpoint_url,
            region=endpoint.region, access_key_id=endpoint.access_key_id,
            secret_access_key="not-the-secret",
        )
        source = tmp_path / "f.bin"
        source.write_bytes(b"data")
        for call in (lambda: store.get_bytes("k"), lambda: store.head("k"),
                     lambda: list(store.list("")), lambda: store.put_file("f", source)):
            with pytest.raises(NereusError, match=r"s3://nereus-test-\w+/tenant-a/") as caught:
                call()
            assert caught.value.hint is not None and "[objects]" in caught.value.hint
        assert good.get_bytes("k") == b"x"

    def test_checkpoint_uploads_and_verifies_through_s3(self, tmp_path: Path) -> None:
        """A checkpoint taken from a real shard database uploads to S3, is catalogued, and
        verifies after download (files, checksums, identity, digest)."""
        from nereus.adapters.backends.shardlog.file_log import FileShardLog
        from nereus.adapters.offline.checkpoint_catalog import catalog
        from nereus.adapters.offline.checkpoint_restore import verify_entry
        from nereus.adapters.offline.checkpoint_take import checkpoint_now
        from nereus.adapters.offline.shard_runner import ShardRunner
        from nereus.records import Schedule, encode
        from nereus.shard import ShardId
        from nereus.state import keys
        from nereus.state.store import ShardStore
        from nereus.state.values import Identity

        store = self.make_store(tmp_path)
        shard = ShardId("default", 0)
        identity = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)
        log = FileShardLog(tmp_path / "log", create=True)
        log.append([encode(Schedule(command_id=f"c{n}", delay_message_id=f"m{n}", lane="local",
                                    deliver_at_ms=10_000 + n, action_at_ms=10_000 + n))
                    for n in range(200)])
        with ShardStore.open(tmp_path / "db", identity=identity, create=True) as db:
            ShardRunner(db, log).run_until_caught_up()
            taken = checkpoint_now(db, shard, store, tmp_path / "staging", token="t1",
                                   now_ms=1_700_000_000_000)
        log.close()
        assert [e.checkpoint_id for e in catalog(store, shard)] == [taken.entry.checkpoint_id]
        report = verify_entry(store, taken.entry)
        assert report.ok, report.document()


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_unreachable_endpoint_raises_service_unreachable_quickly(tmp_path: Path) -> None:
    """Every operation against an endpoint nobody listens on raises ServiceUnreachable
    (exit code 5) naming the store, within seconds, not after long retries."""
    endpoint = f"http://127.0.0.1:{_closed_port()}"

    def store(create_bucket: bool = False) -> S3ObjectStore:
        return S3ObjectStore("nowhere", endpoint_url=endpoint, access_key_id="k",
                             secret_access_key="s", create_bucket=create_bucket)

    source = tmp_path / "f.bin"
    source.write_bytes(b"data")
    calls: dict[str, Callable[[], object]] = {
        "create_bucket": lambda: store(create_bucket=True),
        "put_bytes": lambda: store().put_bytes("k", b"x"),
        "put_file": lambda: store().put_file("k", source),
        "create_if_absent": lambda: store().create_if_absent("k", b"x"),
        "get_bytes": lambda: store().get_bytes("k"),
        "get_file": lambda: store().get_file("k", tmp_path / "out"),
        "head": lambda: store().head("k"),
        "list": lambda: list(store().list("")),
        "delete": lambda: store().delete("k"),
    }
    for name, call in calls.items():
        started = time.monotonic()
        with pytest.raises(ServiceUnreachable, match=r"s3://nowhere/ .*unreachable") as caught:
            call()
        elapsed = time.monotonic() - started
        exit_code = caught.value.exit_code
        assert exit_code == ExitCode.SERVICE_UNREACHABLE and int(exit_code) == 5, name
        assert elapsed < 5, f"{name} took {elapsed:.1f}s to report the endpoint unreachable"


def test_a_server_that_drops_connections_is_unreachable() -> None:
    """A listener that accepts and closes every connection (no HTTP answer) is reported as
    ServiceUnreachable (exit 5), like a closed port."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        server.settimeout(0.2)
        port = server.getsockname()[1]
        stop = threading.Event()

        def drop_connections() -> None:
            while not stop.is_set():
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                conn.close()

        dropper = threading.Thread(target=drop_connections)
        dropper.start()
        try:
            store = S3ObjectStore("nowhere", endpoint_url=f"http://127.0.0.1:{port}",
                                  access_key_id="k", secret_access_key="s")
            with pytest.raises(ServiceUnreachable, match="unreachable") as caught:
                store.get_bytes("k")
            assert caught.value.exit_code == ExitCode.SERVICE_UNREACHABLE
        finally:
            stop.set()
            dropper.join()


def test_cli_exits_5_when_the_object_store_is_unreachable(
    home: Path, nereus: Callable[..., CliResult]
) -> None:
    """``nereus checkpoint list`` with ``[objects]`` on an unreachable S3 endpoint exits 5
    and says which store it could not reach."""
    config = home / "nereus.toml"
    config.write_text(config.read_text() + (
        '\n[objects]\nstore = "s3"\nbucket = "nowhere"\n'
        f'endpoint = "http://127.0.0.1:{_closed_port()}"\n'
        'access_key_id = "k"\nsecret_access_key = "s"\n'))
    result = nereus("checkpoint", "list", "default/0", home=home, timeout=60)
    assert result.code == ExitCode.SERVICE_UNREACHABLE, (result.stdout, result.stderr)
    assert "unreachable" in result.stderr and "s3://nowhere/" in result.stderr
