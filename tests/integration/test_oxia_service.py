"""The Oxia server of ``scripts/services up oxia``: where it listens, and what the script
says about it.

Oxia's public and metrics addresses both default to 0.0.0.0, and the metrics port to 8080,
Pulsar's web port; the script sets both to loopback ports of their own. These tests read
the server's listening sockets from /proc, so they show what it bound, not what was asked.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from tests.integration.oxia_service import OxiaEndpoint, oxia_endpoint, oxia_service  # noqa: F401
from tests.integration.services import run_services, services_env

LISTEN = "0A"  # the TCP state LISTEN in /proc/net/tcp


def listening(pid: int) -> set[tuple[str, int]]:
    """The (address, port) pairs process ``pid`` listens on (IPv4 and IPv6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = str(fd.readlink()) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != LISTEN or fields[9] not in inodes:
                continue
            address, port = fields[1].split(":")
            found.add((_address(address), int(port, 16)))
    return found


def _address(hex_address: str) -> str:
    if len(hex_address) == 8:  # IPv4, little-endian
        return ".".join(str(int(hex_address[i:i + 2], 16)) for i in (6, 4, 2, 0))
    if hex_address.endswith("0100007F"):  # ::ffff:127.0.0.1
        return "127.0.0.1"
    return "::" if set(hex_address) == {"0"} else hex_address


def server_pid() -> int:
    status = run_services("status", "oxia", timeout=30)
    assert status.returncode == 0, status.stdout + status.stderr
    return int(status.stdout.split("(pid ")[1].split(")")[0])


def test_oxia_listens_on_loopback_only_and_not_on_pulsars_port(
        oxia_endpoint: OxiaEndpoint) -> None:  # noqa: F811
    """The server listens on exactly its gRPC port and its metrics port, both on
    127.0.0.1 (nothing on 0.0.0.0, nothing on 8080), and its metrics answer there."""
    metrics = services_env()["NEREUS_OXIA_METRICS_URL"]
    metrics_port = urlsplit(metrics).port
    assert metrics_port not in (None, 8080, oxia_endpoint.port)
    assert listening(server_pid()) == {("127.0.0.1", oxia_endpoint.port),
                                       ("127.0.0.1", metrics_port)}
    with urllib.request.urlopen(metrics, timeout=10) as answer:
        assert b"oxia_server" in answer.read()


def test_status_and_env_name_the_server_and_its_binary(
        oxia_endpoint: OxiaEndpoint) -> None:  # noqa: F811
    """`status oxia` names the address and the metrics URL; `env` exports the endpoint and
    the binary that `up` runs (built into the services cache, outside the repository)."""
    status = run_services("status", "oxia", timeout=30)
    assert f"at {oxia_endpoint.target} (metrics http://127.0.0.1:" in status.stdout
    env = run_services("env", timeout=30).stdout
    assert f"export NEREUS_OXIA_ENDPOINT={oxia_endpoint.target}" in env
    assert f"export NEREUS_OXIA_BIN={oxia_endpoint.binary}" in env
    assert oxia_endpoint.binary.is_file()
    assert Path(__file__).resolve().parents[2] not in oxia_endpoint.binary.parents
