"""This build's feature level, and the level one home (not a cluster's node) was raised to.

A home's level lives in ``<home>/feature-level.json`` (absent: level 1, what 0.1.0 wrote),
written by ``nereus upgrade finalize`` through a synced rename; an engine whose build
supports less than it refuses to start, naming both (a downgrade below what was written).
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
from nereus.features import BASE_LEVEL, check_can_run, supported_level

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
    """Write the home's level durably (temporary file, fsync, rename, fsync the home)."""
    temporary = home / (FILE_NAME + ".tmp")
    with open(temporary, "wb") as out:
        out.write(msgspec.json.encode(record) + b"\n")
        out.flush()
        os.fsync(out.fileno())
    temporary.replace(home / FILE_NAME)
    fsync_dir(home)


def refuse_below_home_level(home: Path) -> None:
    """``FeatureLevelError`` when this build supports less than the home's level."""
    check_can_run(level=home_level(home).level, supported=build_level(),
                  build=__version__, who="this engine", where=f"the home {home}")
