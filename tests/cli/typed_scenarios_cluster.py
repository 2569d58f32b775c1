"""Scenarios of ``tests/cli/test_typed_documents.py`` for the cluster's commands (``cluster
init|config|status|nodes|drain|undrain|migrate|rejoin|rotate-evidence-key|
reseal-evidence-keys``, ``shard move``)
on the embedded coordinator, with nodes simulated by their records
(``tests.cli.cluster_homes``). Each runs the command as an operator would and returns the
documents it printed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from nereus.cluster.records import OwnerState
from tests.cli.cluster_homes import cluster_file, initialised_cluster, simulated
from tests.conftest import run_nereus

Document = dict[str, Any]


def _json(*args: str, home: Path, code: int = 0) -> Any:
    result = run_nereus("--json", *args, home=home)
    assert result.code == code, (args, result.code, result.stdout, result.stderr)
    return result.json()


def _where(home: Path) -> Path:
    directory = home.parent / "cluster"
    directory.mkdir(exist_ok=True)
    return directory


def _cluster_init(home: Path) -> list[Document]:
    """A dry run, the first configuration, and a replacement."""
    directory = _where(home)
    url = f"sqlite://{directory}/coord.db/test"
    source = str(cluster_file(directory))
    dry = _json("cluster", "init", "--coordinator", url, "--from", source, "--dry-run",
                home=home)
    first = _json("cluster", "init", "--coordinator", url, "--from", source, home=home)
    again = _json("cluster", "init", "--coordinator", url, "--from", source, "--replace",
                  "--reason", "same again", home=home)
    return [dry, first, again]


def _cluster_config(home: Path) -> list[Document]:
    url = initialised_cluster(_where(home))
    return [_json("cluster", "config", "--coordinator", url, home=home)]


def _status_and_nodes(home: Path) -> tuple[Document, list[Document]]:
    """A leader, a node owning an ACTIVE and a RECOVERING shard, a node that is gone."""
    url = initialised_cluster(_where(home))
    with simulated(url) as cluster:
        n1, ghost = cluster.node("n1"), cluster.node("ghost", member=False)
        cluster.lead(n1)
        n1.own("default/0")
        n1.own("default/1", OwnerState.RECOVERING)
        ghost.own("default/2")
        status = _json("cluster", "status", "--coordinator", url, home=home)
        nodes = _json("cluster", "nodes", "--coordinator", url, home=home)
    return status, nodes


def _cluster_status(home: Path) -> list[Document]:
    return [_status_and_nodes(home)[0]]


def _cluster_nodes(home: Path) -> list[Document]:
    rows: list[Document] = _status_and_nodes(home)[1]
    assert rows
    return rows


def _shard_move(home: Path) -> list[Document]:
    """A dry run, a move placed, and one whose --wait ends before it is done (exit 6)."""
    url = initialised_cluster(_where(home))
    move = ("shard", "move", "default/0", "--coordinator", url, "--reason", "typed")
    with simulated(url) as cluster:
        cluster.node("n1").own("default/0")
        cluster.node("n2")
        return [_json(*move, "--to", "n2", "--dry-run", home=home),
                _json(*move, "--to", "n2", "--yes", home=home),
                _json(*move, "--to", "n2", "--yes", "--wait", "0.2", home=home, code=6)]


def _cluster_drain(home: Path) -> list[Document]:
    url = initialised_cluster(_where(home))
    drain = ("cluster", "drain", "n1", "--coordinator", url, "--reason", "typed", "--yes")
    with simulated(url) as cluster:
        cluster.node("n1").own("default/0")
        return [_json(*drain, "--dry-run", home=home), _json(*drain, home=home),
                _json(*drain, "--wait", "0.2", home=home, code=6)]


def _cluster_undrain(home: Path) -> list[Document]:
    url = initialised_cluster(_where(home))
    return [_json("cluster", "undrain", "n1", "--coordinator", url, home=home)]


def _cluster_migrate(home: Path) -> list[Document]:
    """A dry run, and the migration to another embedded coordinator."""
    url = initialised_cluster(_where(home))
    to = f"sqlite://{_where(home)}/other.db/test"
    migrate = ("cluster", "migrate", "--coordinator", url, "--to", to, "--reason", "typed")
    return [_json(*migrate, "--dry-run", home=home), _json(*migrate, "--yes", home=home)]


def _cluster_rejoin(home: Path) -> list[Document]:
    """A node's home rejoined at the coordinator its cluster moved to (a dry run, then for
    real, then again: UNCHANGED)."""
    url = initialised_cluster(_where(home))
    to = f"sqlite://{_where(home)}/other.db/test"
    node = home.parent / "node"
    _json("init", "--join", url, "--node-id", "n1", home=node)
    _json("cluster", "migrate", "--coordinator", url, "--to", to, "--reason", "typed", "--yes",
          home=home)
    return [_json("cluster", "rejoin", "--to", to, *more, home=node)
            for more in (("--dry-run",), (), ())]


def _seal_file(path: Path) -> Path:
    """A fresh sealing key file (mode 0600)."""
    import os

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, os.urandom(32).hex().encode())
    os.close(fd)
    return path


def _cluster_rotate_evidence_key(home: Path) -> list[Document]:
    """A dry run and a rotation, at feature level 2 with a sealing key file."""
    url = initialised_cluster(_where(home))
    _json("upgrade", "finalize", "--coordinator", url, "--reason", "typed", "--yes", home=home)
    seal = _seal_file(_where(home) / "seal.key")
    rotate = ("cluster", "rotate-evidence-key", "--coordinator", url, "--seal-key-file",
              str(seal), "--reason", "typed")
    return [_json(*rotate, "--dry-run", home=home), _json(*rotate, "--yes", home=home)]


def _cluster_reseal_evidence_keys(home: Path) -> list[Document]:
    """At feature level 2: a dry run, the plain key sealed under a new sealing key, then
    re-sealed under another."""
    url = initialised_cluster(_where(home))
    _json("upgrade", "finalize", "--coordinator", url, "--reason", "typed", "--yes", home=home)
    first, second, third = (_seal_file(_where(home) / f"seal-{n}.key") for n in range(3))

    def reseal(old: Path, new: Path, *more: str) -> Document:
        document: Document = _json(
            "cluster", "reseal-evidence-keys", "--coordinator", url, "--seal-key-file",
            str(old), "--new-key-file", str(new), "--reason", "typed", *more, home=home)
        return document

    return [reseal(first, second, "--dry-run"), reseal(first, second, "--yes"),
            reseal(second, third, "--yes")]


CLUSTER_SCENARIOS: dict[str, Callable[[Path], list[Document]]] = {
    "cluster init": _cluster_init,
    "cluster config": _cluster_config,
    "cluster status": _cluster_status,
    "cluster nodes": _cluster_nodes,
    "shard move": _shard_move,
    "cluster drain": _cluster_drain,
    "cluster undrain": _cluster_undrain,
    "cluster migrate": _cluster_migrate,
    "cluster rejoin": _cluster_rejoin,
    "cluster rotate-evidence-key": _cluster_rotate_evidence_key,
    "cluster reseal-evidence-keys": _cluster_reseal_evidence_keys,
}
