"""Private servers inside a partition test's server namespace (``netns.Network``): an Oxia
standalone and an etcd on the coordinator's address, a Kafka (KRaft, broker + controller)
on the broker's address, each started as ``scripts/services`` starts the shared ones (the
same binaries and jars, taken from its cache: ``scripts/services fetch`` first), with data
and logs under the test's directory. The shared servers on 127.0.0.1 are untouched, and
these ones clash with nothing: their ports are the server namespace's own.

``ServerProcess`` owns one child (``stop`` kills it: SIGKILL, what a partition test needs
of a server is only that it goes); readiness is a TCP connect from the test's namespace,
then the caller's own round trip (``wait_until``).
"""

from __future__ import annotations

import base64
import contextlib
import glob
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from tests.integration.netns import Network
from tests.integration.services import ROOT, run_services, services_env
from tests.polling import wait_until

OXIA_PORT = 6648
ETCD_PORT = 2379
KAFKA_PORT = 9092
KAFKA_CONFIG = ROOT / "scripts" / "services.d" / "kafka"
CACHE = Path(os.environ.get("NEREUS_SERVICES_CACHE", Path.home() / ".cache/nereus-services"))


class ServerProcess:
    """One server started inside a namespace; ``stop`` ends it."""

    def __init__(self, name: str, argv: Sequence[str], log: Path, *, cwd: Path) -> None:
        self.name = name
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, cwd=cwd,
                                         start_new_session=True)

    def accepting(self, address: str, port: int) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"the private {self.name} exited {self.proc.returncode}: "
                                 f"{self.log.read_text(errors='replace')[-2_000:]}")
        with socket.socket() as sock:
            sock.settimeout(1)
            return sock.connect_ex((address, port)) == 0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def _fetched(service: str) -> None:
    done = run_services("fetch", service, timeout=900)
    assert done.returncode == 0, f"scripts/services fetch {service}: {done.stderr[-2_000:]}"


def oxia_binary() -> Path:
    _fetched("oxia")
    return Path(services_env()["NEREUS_OXIA_BIN"])


def etcd_binary() -> Path:
    _fetched("etcd")
    found = os.environ.get("NEREUS_ETCD_BIN") or shutil.which("etcd") or \
        str(CACHE / "etcd-server" / "usr" / "bin" / "etcd")
    return Path(found)


def kafka_lib() -> Path:
    _fetched("kafka")
    found = sorted(glob.glob(str(CACHE / "kafka-*" / ".complete")))
    assert found, f"no Kafka jars under {CACHE} after `scripts/services fetch kafka`"
    return Path(found[-1]).parent / "lib"


def java() -> str:
    home = os.environ.get("NEREUS_SERVICES_JAVA_HOME") or os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    assert found, "no java on PATH for the private Kafka (JDK 17+)"
    return found


@contextlib.contextmanager
def private_oxia(net: Network, directory: Path) -> Iterator[str]:
    """Oxia on the coordinator's address; yields its ``HOST:PORT``."""
    directory.mkdir(parents=True, exist_ok=True)
    address = net.coordinator_address
    server = ServerProcess("Oxia", [
        *net.enter(net.servers), str(oxia_binary()), "standalone", "--log-json",
        "--data-dir", str(directory / "db"), "--wal-dir", str(directory / "wal"),
        "--public-addr", f"{address}:{OXIA_PORT}", "--metrics-addr", f"{address}:6649",
        "--shards", "1", "--wal-sync-data=true"], directory / "oxia.log", cwd=directory)
    try:
        wait_until("the private Oxia accepts connections",
                   lambda: server.accepting(address, OXIA_PORT), 30)
        yield f"{address}:{OXIA_PORT}"
    finally:
        server.stop()


@contextlib.contextmanager
def private_etcd(net: Network, directory: Path) -> Iterator[str]:
    """etcd on the coordinator's address (its peer port on the namespace's loopback);
    yields its ``HOST:PORT``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "data").mkdir(mode=0o700, exist_ok=True)
    address = net.coordinator_address
    client, peer = f"http://{address}:{ETCD_PORT}", "http://127.0.0.1:2380"
    server = ServerProcess("etcd", [
        *net.enter(net.servers), str(etcd_binary()), "--name=nereus",
        f"--data-dir={directory / 'data'}", f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}", f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}", f"--initial-cluster=nereus={peer}",
        "--initial-cluster-state=new", "--logger=zap", "--log-outputs=stderr"],
        directory / "etcd.log", cwd=directory)
    try:
        wait_until("the private etcd accepts connections",
                   lambda: server.accepting(address, ETCD_PORT), 30)
        yield f"{address}:{ETCD_PORT}"
    finally:
        server.stop()


@contextlib.contextmanager
def private_kafka(net: Network, directory: Path) -> Iterator[str]:
    """Kafka on the broker's address, its KRaft controller on the namespace's loopback;
    yields the bootstrap address once a record round-trips."""
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "data"
    address = net.broker_address
    template = (KAFKA_CONFIG / "server.properties.in").read_text()
    config = (template.replace("127.0.0.1:@PORT@", f"{address}:{KAFKA_PORT}")
              .replace("@CONTROLLER_PORT@", "9093").replace("@DATA_DIR@", str(data)))
    properties = directory / "server.properties"
    properties.write_text(config)
    lib, program = kafka_lib(), java()
    log4j = f"-Dlog4j2.configurationFile={KAFKA_CONFIG / 'log4j2.xml'}"
    cluster_id = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
    if cluster_id.startswith("-"):
        cluster_id = "A" + cluster_id[1:]
    formatted = subprocess.run(
        [program, "-cp", f"{lib}/*", log4j, "kafka.tools.StorageTool", "format",
         "--standalone", "--cluster-id", cluster_id, "--config", str(properties)],
        capture_output=True, text=True, timeout=120, check=False)
    assert formatted.returncode == 0, f"kafka storage format: {formatted.stdout[-2_000:]}"
    server = ServerProcess("Kafka", [
        *net.enter(net.servers), program, "-Xms128m", "-Xmx512m", "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true", log4j,
        f"-Dkafka.logs.dir={directory / 'logs'}", "-cp", f"{lib}/*", "kafka.Kafka",
        str(properties)], directory / "kafka.log", cwd=directory)
    bootstrap = f"{address}:{KAFKA_PORT}"
    try:
        wait_until("the private Kafka accepts connections",
                   lambda: server.accepting(address, KAFKA_PORT), 90)
        wait_until("the private Kafka takes a record", lambda: _round_trip(bootstrap), 60,
                   interval_s=0.5)
        yield bootstrap
    finally:
        server.stop()


def _round_trip(bootstrap: str) -> bool:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5_000,
                         "log_level": 0})
    producer.produce("nereus-probe", b"probe")
    return producer.flush(8) == 0
