"""What the admin socket's server asks of the engine behind it: one method per endpoint.

Every host shape answers through this one Protocol, and the server
(``nereus.engine.hosting.admin_server``) cannot tell them apart: a single daemon's
``AdminApi`` answers from the shards of its process; a cluster node's ``NodeApi``
(``hosting.cluster.node_api``) asks another node's shards of their owner; the front door of
``engine start --workers N`` (``hosting.workers.front_api``) asks the worker processes that
own the shards. A command's code never knows which one answered.
"""

from __future__ import annotations

from typing import Protocol

from nereus.adapters.admin.wire import (
    AppendAnswer,
    AppendRequest,
    CheckpointRequest,
    EngineStatus,
    LaneView,
    MessageExplanation,
    MetricsExposition,
    OpenAttemptView,
    PlanAnswer,
    PlanRequest,
    ShardView,
)
from nereus.adapters.offline.checkpoint_take import CheckpointTaken
from nereus.adapters.offline.command_lookup import CommandStatus
from nereus.views import MessageDetail, MessageList


class AdminEndpoints(Protocol):
    """The admin socket's endpoints, typed (``server.py`` routes the requests to them)."""

    def status(self) -> EngineStatus: ...

    def shards(self) -> list[ShardView]: ...

    def lanes(self) -> list[LaneView]: ...

    def attempts(self, *, shard: str | None, state: str | None,
                 limit: int | None = None) -> list[OpenAttemptView]: ...

    def messages(self, *, shard: str | None, state: str | None, lane: str | None,
                 limit: int, after: str | None = None) -> MessageList: ...

    def message(self, delay_message_id: str, *, route: str = "default",
                barrier: bool = False, everywhere: bool = False) -> MessageDetail: ...

    def explain(self, delay_message_id: str, *, route: str = "default"
                ) -> MessageExplanation: ...

    def command(self, command_id: str) -> CommandStatus: ...

    def checkpoint(self, request: CheckpointRequest) -> CheckpointTaken: ...

    def plan_mutation(self, request: PlanRequest) -> PlanAnswer: ...

    def submit(self, request: AppendRequest) -> AppendAnswer: ...

    def metrics(self) -> MetricsExposition: ...
