"""Homes for the tests of sealed route evidence keys as an operator meets them
(``cluster rotate-evidence-key``, ``cluster reseal-evidence-keys``): every command's output
kept (to hold it to the secrets), a cluster configuration with a Kafka route and a file
lane, a node's sealing key file, and a message's published record."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from tests.conftest import CliResult, run_nereus
from tests.polling import wait_until

ROUTE = "default"


class Runs:
    """Every command run, so the test can hold all their output to the secrets."""

    def __init__(self) -> None:
        self.outputs: list[str] = []

    def __call__(self, *args: str, home: Path, code: int = 0) -> CliResult:
        result = run_nereus(*args, home=home)
        self.outputs.append(result.stdout + result.stderr)
        assert result.code == code, f"{args}: {result.stdout}{result.stderr}"
        return result


def cluster_file(directory: Path, bootstrap: str) -> Path:
    path = directory / "cluster.toml"
    path.write_text(f'[routes.{ROUTE}]\nid = "rot-route"\nlog = "kafka"\npartitions = 1\n'
                    f'bootstrap = "{bootstrap}"\ntopic = "rot-{uuid.uuid4().hex[:8]}"\n\n'
                    '[lanes.local]\ndestination = "file"\npath = "outbox/local.jsonl"\n\n'
                    f'[objects]\nstore = "file"\npath = "{directory / "objects"}"\n')
    return path


def give_seal_key(home: Path, key_hex: str) -> None:
    """The sealing key file (0600) in ``home``, and the reference to it in the home's
    ``[cluster]`` when it has one."""
    home.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(home / "seal.key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, (key_hex + "\n").encode())
    os.close(fd)
    config = home / "nereus.toml"
    if config.exists():
        config.write_text(config.read_text().replace(
            "[cluster]\n", '[cluster]\nevidence_seal_key_file = "seal.key"\n', 1))


def published(node: Path, message_id: str) -> dict[str, Any]:
    """The file lane's record of ``message_id``, once the node published it."""
    import json

    def line() -> dict[str, Any] | None:
        path = node / "outbox" / "local.jsonl"
        records = [json.loads(text) for text in path.read_text().splitlines()] \
            if path.exists() else []
        return next((r for r in records if r["delay_message_id"] == message_id), None)

    return wait_until(f"{message_id} published", line, 60)
