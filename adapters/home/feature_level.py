"""This build's feature level, and the level one home (not a cluster's node) was raised to.

A home's level lives in ``<home>/feature-level.json`` (absent: level 1, what 0.1.0 wrote),
written by ``nereus upgrade finalize`` through a synced rename, and as ``[features] level``
in its ``nereus.toml``; an engine whose build supports less than it refuses to start,
naming both (a downgrade below what was written), and a 0.1.0 build, which knows no levels,
refuses the file's ``[features]`` table.
A cluster's level is in its coordinator instead (``adapters/cluster/feature_levels.py``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import msgspec

from nereus import __version__
from nereus.adapters.home.durable_files import fsync_dir
from nereus.cluster.records import FeatureLevel
from nereus.features import BASE_LEVEL, check_can_run, supported_level, with_features

FILE_NAME: Final = "feature-level.json"
TESTING_ENV: Final = "NEREUS_FEATURE_LEVEL_TESTING"  # "1": claim the test-only level


def build_level() -> int:
    """The highest feature level this build claims (the test-only one when told to)."""
    return supported_level(testing=os.environ.get(TESTING_ENV) == "1")


def home_level(home: Path) -> FeatureLevel:
    """The home's feature level (``BASE_LEVEL`` when never raised)."""
    path = home / FILE_NAME
    if not path.exists():
        return FeatureLevel(level=BASE_LEVEL)
    return msgspec.json.decode(path.read_bytes(), type=FeatureLevel)


def write_home_level(home: Path, record: FeatureLevel) -> None:
    """Write the home's level durably, and ``[features] level`` into its ``nereus.toml``
    (the table a 0.1.0 build refuses, so it does not start on the home)."""
    config = home / "nereus.toml"
    if config.exists():
        _write_durably(config, with_features(config.read_text(), record.level).encode())
    _write_durably(home / FILE_NAME, msgspec.json.encode(record) + b"\n")


def _write_durably(path: Path, data: bytes) -> None:
    """Temporary file (the same mode), fsync, rename, fsync the directory."""
    temporary = path.with_name(path.name + ".tmp")
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    temporary.replace(path)
    fsync_dir(path.parent)


def refuse_below_home_level(home: Path) -> None:
    """``FeatureLevelError`` when this build supports less than the home's level."""
    check_can_run(level=home_level(home).level, supported=build_level(),
                  build=__version__, who="this engine", where=f"the home {home}")
