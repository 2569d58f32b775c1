"""An engine asked about a shard it does not own answers "not here", never "no such message":
whether the message exists is not known there (found by the chaos runs on a cluster: a
barrier query while the message's shard was between owners answered NotFound)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from nereus.config import parse_config
from nereus.engine.admin.api import AdminApi
from nereus.errors import EngineUnreachable, NotFound, ShardNotHere
from nereus.shard import ShardId

CONFIG = parse_config('[routes.default]\npartitions = 4\n\n[lanes.local]\ndestination = "file"\n'
                      'path = "out.jsonl"\n', source="nereus.toml")


class Owners:
    def __init__(self, owner: str | None) -> None:
        self.owner = owner

    def owner_of(self, shard: ShardId) -> str | None:
        return self.owner


def _api(owner: str | None) -> AdminApi:
    engine: Any = SimpleNamespace(config=CONFIG, shards={})
    return AdminApi(engine, owners=Owners(owner))


@pytest.mark.parametrize("barrier", [False, True])
def test_a_message_on_a_shard_between_owners_is_not_a_not_found(barrier: bool) -> None:
    """No owner right now: ShardNotHere (exit 4, "try again"), which is not a NotFound."""
    with pytest.raises(ShardNotHere, match="no owner answers for it right now") as raised:
        _api(None).message("m1", barrier=barrier)
    assert not isinstance(raised.value, NotFound)
    assert isinstance(raised.value, EngineUnreachable)


def test_a_shard_owned_elsewhere_names_its_owner() -> None:
    """Owned by another node: the error names it and says to ask that node."""
    with pytest.raises(ShardNotHere, match="node b owns it"):
        _api("node b").messages(shard="default/1", state=None, lane=None, limit=1)
