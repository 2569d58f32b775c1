"""Fixtures shared by the CLI tests: module-scoped homes, one with a running engine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.engine_homes import init_home
from tests.daemon import running_engine


@pytest.fixture(scope="module")
def engine_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One engine for the module, on a fresh two-shard home; stopped at module end."""
    home = init_home(tmp_path_factory.mktemp("engine") / "home")
    with running_engine(home):
        yield home


@pytest.fixture(scope="module")
def offline_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh home no engine ever runs on."""
    return init_home(tmp_path_factory.mktemp("offline") / "home")
