"""Which checkpoints ``checkpoint prune`` may delete: never a Recovery Set member."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nereus.checkpoint.manifest import CatalogEntry
from nereus.checkpoint.retention import Refusal, plan_prune


def entries(count: int) -> list[CatalogEntry]:
    return [CatalogEntry(checkpoint_id=f"cp-{n}", route="default", partition=0,
                         applied_position=n * 10, digest="d", manifest_key=f"k/{n}",
                         created_at="t", created_at_ms=n) for n in range(count)]


def ids(items: Sequence[CatalogEntry | Refusal]) -> list[str]:
    return [(i.entry if isinstance(i, Refusal) else i).checkpoint_id for i in items]


def test_keeps_the_newest_and_deletes_the_rest() -> None:
    """--keep N keeps the newest N (oldest first order) and deletes the older ones."""
    plan = plan_prune(entries(5), keep=3, recovery_keep=2)
    assert ids(plan.kept) == ["cp-2", "cp-3", "cp-4"]
    assert ids(plan.deleted) == ["cp-0", "cp-1"]
    assert plan.refused == ()


def test_recovery_set_members_are_refused_not_deleted() -> None:
    """Asking to keep fewer than the Recovery Set refuses the members, with the reason."""
    plan = plan_prune(entries(5), keep=1, recovery_keep=3)
    assert ids(plan.kept) == ["cp-2", "cp-3", "cp-4"]
    assert ids(plan.deleted) == ["cp-0", "cp-1"]
    assert ids(plan.refused) == ["cp-2", "cp-3"]
    assert "Recovery Set" in plan.refused[0].reason


def test_keep_must_be_positive() -> None:
    """Keeping nothing is never a plan (the CLI's --keep has min 1 as well)."""
    with pytest.raises(ValueError):
        plan_prune(entries(2), keep=0, recovery_keep=1)


@given(st.integers(0, 12), st.integers(1, 12), st.integers(1, 12))
def test_members_never_deleted_and_nothing_lost(count: int, keep: int, recovery: int) -> None:
    """Kept and deleted partition the catalog; no member of the newest `recovery` is deleted."""
    catalog = entries(count)
    plan = plan_prune(catalog, keep=keep, recovery_keep=recovery)
    assert sorted(ids(plan.kept) + ids(plan.deleted)) == sorted(ids(catalog))
    members = set(ids(catalog[-recovery:]))
    assert not members & set(ids(plan.deleted))
    assert len(plan.deleted) == max(0, count - max(keep, recovery))
