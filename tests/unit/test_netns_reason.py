"""The partition tests' network (``tests/integration/netns.py``) says why it cannot be made
where it cannot, so those tests skip with the reason instead of failing half-built."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.integration import netns


def test_without_root_the_reason_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not root: the reason says namespaces need root (nothing is tried)."""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    reason = netns.unavailable()
    assert reason is not None and "root" in reason


def test_without_the_tools_the_reason_names_the_missing_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Root, but no `nsenter`: the reason names it and its package."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which",
                        lambda tool: None if tool == "nsenter" else f"/usr/bin/{tool}")
    reason = netns.unavailable()
    assert reason is not None and "nsenter" in reason and "util-linux" in reason
