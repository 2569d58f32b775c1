"""``nereus mutate submit FILE.toml``, ``shard pause|resume``, ``message break``.

``mutate submit`` applies any operator mutation written as TOML (a change prepared in a
ticket or a review, applied as written)::

    kind = "LANE_GATE"            # or LANE_CONFIG, LANE_LIMITS, ATTEMPT_RESOLVE,
    lane = "payments"             #    MESSAGE_BREAK, SHARD_PAUSE, SHARD_RESUME
    gate = "CLOSED"
    reason = "INC-4411: downstream broker degraded"
    # optional: operator, idempotency_key, precondition_digest, shards / shard / route

Several go in ``[[mutation]]`` tables: all planned first, confirmed once, appended in file
order; ``--as`` and ``--reason`` fill in what a table leaves out. Every mutation takes the
dedicated commands' path (``nereus.cli.mutation``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Protocol, cast

import typer

from nereus.cli import mutation as mutation_opts
from nereus.cli.context import Env
from nereus.cli.output import Answered
from nereus.errors import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.cli.mutation import Identity, Planned
    from nereus.cli.mutation.document import (
        MutationDocument,
        MutationDryRun,
        Mutations,
        MutationsDryRun,
    )
    from nereus.records.codec import OperatorMutation
    from nereus.shard import ShardId

app = typer.Typer(help="Submit any operator mutation from a TOML file.", no_args_is_help=True)

_PLACEMENT = ("shards", "shard", "route")
_IDENTITY = ("operator", "reason", "idempotency_key", "precondition_digest")


@app.command("submit")
def submit(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(metavar="FILE.toml", help="The mutation(s), as TOML.")],
    reason: Annotated[str | None, typer.Option(
        "--reason", help="Reason for tables that do not give one.")] = None,
    operator: mutation_opts.AsOpt = None,
    dry_run: mutation_opts.DryRunOpt = False,
    yes: mutation_opts.YesOpt = False,
    wait: mutation_opts.WaitOpt = False,
) -> None:
    """Plan, confirm and append the operator mutation(s) in FILE.toml."""
    from nereus.cli import mutation
    from nereus.cli.mutation.document import Mutations, MutationsDryRun

    env: Env = ctx.obj
    tables = _read(file)
    planned: list[Planned] = []
    for number, table in enumerate(tables, start=1):
        where = f"{file}: mutation {number}" if len(tables) > 1 else str(file)
        record, shards, who = _parse(env, table, where, reason=reason, operator=operator)
        planned.append(mutation.plan(env, build=_fixed(record), shards=shards, who=who,
                                     dry_run=dry_run, wait=wait, ahead=planned))
    docs: Sequence[MutationDocument | MutationDryRun]
    several: Mutations | MutationsDryRun
    if dry_run:
        runs = [item.dry_run() for item in planned]
        docs, several = runs, MutationsDryRun(mutations=runs, result=_overall(runs))
    else:
        if not yes:
            mutation.confirm(env, planned)
        done = [mutation.commit(env, item, wait=wait) for item in planned]
        docs, several = done, Mutations(mutations=done, result=_overall(done))
    if len(docs) == 1:
        mutation.report(env, docs[0])
    else:
        _report_all(env, several)
    if any(mutation.failed(d) for d in docs):
        raise Answered(ExitCode.NO)
    mutation.not_known(env, docs, wait=wait and not dry_run)


def _overall(docs: Sequence[MutationDocument | MutationDryRun]) -> str:
    """STALE or REJECTED when one of the mutations is, else the first one's result."""
    results = [d.result for d in docs]
    return next((v for v in ("STALE", "REJECTED") if v in results), results[0])


def _report_all(env: Env, document: Mutations | MutationsDryRun) -> None:
    """Several mutations in one document: each one's, and the overall result."""
    import msgspec

    from nereus.cli import mutation
    from nereus.cli.output import shown

    def human(out: Console) -> None:
        for doc in shown(document).mutations:
            mutation.print_document(out, doc)

    env.output.emit(msgspec.to_builtins(document), human)


def _fixed(record: OperatorMutation) -> Callable[[ShardId], OperatorMutation]:
    return lambda _shard: record


def _read(file: Path) -> list[dict[str, object]]:
    import tomllib

    from nereus.errors import NotFound, UsageError

    try:
        text = file.read_text()
    except FileNotFoundError:
        raise NotFound(f"no mutation file {file}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{file}: not valid TOML: {exc}") from None
    if "mutation" in data:
        tables = data.pop("mutation")
        if data or not isinstance(tables, list) or not tables:
            raise UsageError(f"{file}: give one mutation at the top level or [[mutation]] "
                             "tables, not both")
        return tables
    if "kind" not in data:
        raise UsageError(f"{file}: no kind (LANE_GATE, LANE_CONFIG, LANE_LIMITS, "
                         "ATTEMPT_RESOLVE, MESSAGE_BREAK, SHARD_PAUSE or SHARD_RESUME)")
    return [data]


def _parse(env: Env, table: dict[str, object], where: str, *, reason: str | None,
           operator: str | None) -> tuple[OperatorMutation, list[ShardId], Identity]:
    """The record, its shards and its identity from one TOML table; errors name the field."""
    import msgspec

    from nereus.cli import mutation
    from nereus.errors import UsageError
    from nereus.records.codec import OPERATOR_MUTATIONS
    from nereus.records.operator import LaneConfig, LaneGate, LaneLimits, MessageBreak

    fields = dict(table)
    placement = {name: fields.pop(name) for name in _PLACEMENT if name in fields}
    kinds = {str(cls.__struct_config__.tag): cls for cls in OPERATOR_MUTATIONS}
    kind = fields.get("kind")
    if kind not in kinds:
        raise UsageError(f"{where}: kind {kind!r} is not an operator mutation; one of "
                         f"{', '.join(sorted(kinds))}")
    precondition = fields.get("precondition_digest")  # not text: the convert below says so
    who = mutation.identity(
        operator if operator is not None else _text(fields, "operator", where),
        _text(fields, "reason", where) or reason or "", _text(fields, "idempotency_key", where),
        precondition if isinstance(precondition, str) else None)
    fields.update(operator=who.operator, reason=who.reason, idempotency_key="")
    try:
        record = cast("OperatorMutation", msgspec.convert(fields, kinds[kind]))
    except msgspec.ValidationError as exc:
        raise UsageError(f"{where}: {exc}",
                         hint="see `man nereus-mutate` for each kind's fields") from None
    if isinstance(record, LaneGate | LaneConfig | LaneLimits):
        shards = mutation.every_shard(env, _as_list(placement.get("shards"), where))
    elif isinstance(record, MessageBreak):
        shards = [_message_shard(env, record.delay_message_id, placement.get("route"))]
    elif "shard" in placement:
        shards = [env.shard(str(placement["shard"]))]
    else:
        raise UsageError(f"{where}: {kind} needs shard = \"ROUTE/PARTITION\"")
    return record, shards, who


def _text(fields: dict[str, object], name: str, where: str) -> str | None:
    """A table's text field (``None`` when absent); anything else is a usage error."""
    from nereus.errors import UsageError

    value = fields.get(name)
    if value is not None and not isinstance(value, str):
        raise UsageError(f"{where}: {name} must be a string, not {type(value).__name__}")
    return value


def _as_list(value: object, where: str) -> list[str] | None:
    from nereus.errors import UsageError

    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where}: shards must be a list of \"ROUTE/PARTITION\" strings")
    return value


def _message_shard(env: Env, delay_message_id: str, route: object) -> ShardId:
    return env.message_shard(env.config.route_name(str(route) if route else None),
                             delay_message_id)


# shard pause / resume, message break (registered on their groups in cli/main.py) -------
ShardArg = Annotated[str, typer.Argument(help="The shard, ROUTE/PARTITION.")]


class PauseCommand(Protocol):
    """``shard pause`` and ``shard resume``: the signature Typer reads."""

    def __call__(self, ctx: typer.Context, shard: str, reason: str, operator: str | None = None,
                 key: str | None = None, precondition: str | None = None,
                 dry_run: bool = False, yes: bool = False, wait: bool = False) -> None: ...


def _pause_command(pause: bool, summary: str) -> PauseCommand:
    """The ``shard pause`` or ``shard resume`` command: one signature, one record kind each."""

    def command(
        ctx: typer.Context,
        shard: ShardArg,
        reason: mutation_opts.ReasonOpt,
        operator: mutation_opts.AsOpt = None,
        key: mutation_opts.KeyOpt = None,
        precondition: mutation_opts.PreconditionOpt = None,
        dry_run: mutation_opts.DryRunOpt = False,
        yes: mutation_opts.YesOpt = False,
        wait: mutation_opts.WaitOpt = False,
    ) -> None:
        _pause_or_resume(ctx, shard, pause=pause, reason=reason, operator=operator, key=key,
                         precondition=precondition, dry_run=dry_run, yes=yes, wait=wait)

    command.__doc__ = summary
    return command


shard_pause = _pause_command(
    True, "Stop new Publish Admissions on a shard; commands still apply (asks for confirmation).")
shard_resume = _pause_command(False, "Allow Publish Admissions on a paused shard again.")


def _pause_or_resume(ctx: typer.Context, shard: str, *, pause: bool, reason: str,
                     operator: str | None, key: str | None, precondition: str | None,
                     dry_run: bool, yes: bool, wait: bool) -> None:
    from nereus.cli import mutation
    from nereus.records import ShardPause, ShardResume

    env: Env = ctx.obj
    target = env.shard(shard)
    who = mutation.identity(operator, reason, key, precondition)
    kind = ShardPause if pause else ShardResume
    mutation.run(env, build=lambda _shard: kind(
        operator=who.operator, reason=who.reason, precondition_digest=who.precondition),
        shards=[target], who=who, dry_run=dry_run, yes=yes, wait=wait)


def message_break(
    ctx: typer.Context,
    message_id: Annotated[str, typer.Argument(metavar="ID", help="The delayMessageId.")],
    reason: mutation_opts.ReasonOpt,
    route: Annotated[str | None, typer.Option(
        "--route", help="The message's route (default: the only configured route, else "
        "default).")] = None,
    operator: mutation_opts.AsOpt = None,
    key: mutation_opts.KeyOpt = None,
    precondition: mutation_opts.PreconditionOpt = None,
    dry_run: mutation_opts.DryRunOpt = False,
    yes: mutation_opts.YesOpt = False,
    wait: mutation_opts.WaitOpt = False,
) -> None:
    """Take a SCHEDULED message out of scheduling for good: FAILED, BROKEN (asks first)."""
    from nereus.cli import mutation
    from nereus.records import MessageBreak

    env: Env = ctx.obj
    who = mutation.identity(operator, reason, key, precondition)
    mutation.run(env, build=lambda _shard: MessageBreak(
        delay_message_id=message_id, operator=who.operator, reason=who.reason,
        precondition_digest=who.precondition),
        shards=[_message_shard(env, message_id, route)], who=who, dry_run=dry_run, yes=yes,
        wait=wait)
