"""``nereus attempt``: open publish attempts (PUBLISHING and UNKNOWN) and their evidence."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from nereus.cli import mutation as mutation_opts
from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.shard import ShardId

app = typer.Typer(help="Open publish attempts and their evidence.", no_args_is_help=True)


@app.command("list")
def list_attempts(
    ctx: typer.Context,
    state: Annotated[str | None, typer.Option(
        "--state", help="publishing or unknown (default: both).")] = None,
    shard: Annotated[str | None, typer.Option("--shard", help="Only this shard.")] = None,
) -> None:
    """Attempts with an open obligation (needs the engine)."""
    import msgspec

    from nereus.adapters.admin.wire import OpenAttemptView
    from nereus.cli.output import shown
    from nereus.errors import UsageError

    env: Env = ctx.obj
    if state is not None and state.lower() not in ("publishing", "unknown"):
        raise UsageError(f"--state {state!r}: expected publishing or unknown")
    attempts = msgspec.convert(
        env.admin().get("/v1/attempts", state=state, shard=shard)["attempts"],
        list[OpenAttemptView])

    def human(out: Console) -> None:
        from rich.table import Table

        # ids are never wrapped (an operator copies them whole); evidence, free text of any
        # length, follows the table one attempt per line instead of a narrow last column
        table = Table("attempt", "shard", "message", "lane", "state", "admitted")
        for column in table.columns:
            column.no_wrap = True
        rows = list(map(shown, attempts))
        for a in rows:
            table.add_row(a.attempt_id, a.shard, a.delay_message_id, a.lane, a.state,
                          a.admitted_at)
        out.print(table)
        if not attempts:
            out.print("no open attempts")
        for a in rows:
            if a.evidence:
                out.print(f"evidence of {a.attempt_id}: {a.evidence}", soft_wrap=True)

    env.output.emit(msgspec.to_builtins(attempts), human)


@app.command("resolve")
def resolve(
    ctx: typer.Context,
    attempt_id: Annotated[str, typer.Argument(metavar="ATTEMPT", help="The UNKNOWN attempt.")],
    evidence: Annotated[str, typer.Option(
        "--evidence", help="Where the message landed: kafka:TOPIC/PARTITION@OFFSET, "
        "pulsar:TOPIC@LEDGER:ENTRY:PARTITION or PATH@OFFSET (the record is fetched and its "
        "attempt id and evidence MAC checked); free text only with --unverified.")],
    reason: mutation_opts.ReasonOpt,
    published: Annotated[bool | None, typer.Option(
        "--published/--not-published",
        help="The message was published (settle it PUBLISHED) or not (back to the timeline "
             "for a retry, or FAILED when no retries are left).")] = None,
    shard: Annotated[str | None, typer.Option(
        "--shard", help="The attempt's shard (default: found by looking it up).")] = None,
    unverified: Annotated[bool, typer.Option(
        "--unverified/--verified", help="--unverified records the evidence as your word, "
        "unchecked (free text, or --not-published, which no destination record can prove); "
        "--verified (the default) fetches the record it names and checks it.")] = False,
    operator: mutation_opts.AsOpt = None,
    key: mutation_opts.KeyOpt = None,
    precondition: mutation_opts.PreconditionOpt = None,
    dry_run: mutation_opts.DryRunOpt = False,
    yes: mutation_opts.YesOpt = False,
    wait: mutation_opts.WaitOpt = False,
) -> None:
    """Settle an UNKNOWN attempt with evidence (ATTEMPT_RESOLVE; asks for confirmation)."""
    from nereus.cli import mutation
    from nereus.errors import UsageError
    from nereus.records import AttemptResolve, Resolution

    env: Env = ctx.obj
    if published is None:
        raise UsageError("say what the evidence shows: --published or --not-published")
    if not evidence.strip():
        raise UsageError("--evidence must say what proves the outcome")
    if not published and not unverified:
        raise UsageError("no destination record can prove a message was NOT published",
                         hint="pass --unverified to record your evidence as your word")
    who = mutation.identity(operator, reason, key, precondition)
    target = env.shard(shard) if shard else _attempt_shard(env, attempt_id)
    if not unverified:
        evidence = _verify(env, target, attempt_id, evidence)
    resolution = Resolution.PUBLISHED if published else Resolution.NOT_PUBLISHED
    mutation.run(env, build=lambda _shard: AttemptResolve(
        attempt_id=attempt_id, resolution=resolution, evidence=evidence,
        verified=not unverified, operator=who.operator, reason=who.reason,
        precondition_digest=who.precondition),
        shards=[target], who=who, dry_run=dry_run, yes=yes, wait=wait)


def _verify(env: Env, shard: ShardId, attempt_id: str, reference: str) -> str:
    """Fetch the record ``reference`` names; it must carry this attempt's id and evidence
    MAC (under the route's key). Returns the evidence text to record."""
    import time

    from nereus.adapters.backends.destination.evidence_fetch import fetch_evidence, is_reference
    from nereus.adapters.home.route_secrets import evidence_keys
    from nereus.errors import NereusError, NotFound, UsageError
    from nereus.evidence_mac import mac_accepted
    from nereus.state import keys
    from nereus.state.store import ShardStore
    from nereus.state.values import Attempt, decode_value

    if not is_reference(reference):
        raise UsageError(f"--evidence {reference!r} names no destination record, so it cannot "
                         "be checked",
                         hint="give kafka:TOPIC/PARTITION@OFFSET, "
                         "pulsar:TOPIC@LEDGER:ENTRY:PARTITION or PATH@OFFSET, or pass "
                         "--unverified to record it as your word")
    with ShardStore.open(env.layout.shard_state(shard), read_only=True) as store:
        raw = store.get(keys.attempt_key(attempt_id))
    if raw is None:
        raise NotFound(f"no attempt {attempt_id} on shard {shard}")
    attempt = decode_value(raw, Attempt)
    lane = env.config.lanes.get(attempt.lane)
    if lane is None:
        raise NotFound(f"attempt {attempt_id} is on lane {attempt.lane}, which "
                       f"{env.config.source} does not configure: its destination is unknown")
    fetched = fetch_evidence(reference, lane)
    if fetched.attempt_id != attempt_id:
        raise NereusError(
            f"{reference} is not attempt {attempt_id}'s record: it carries attempt "
            f"{fetched.attempt_id or '(none)'}", hint="find the record with this attempt's "
            "nereus-attempt-id, or pass --unverified")
    route_keys = evidence_keys(env.home, shard.route, create=False)
    if not mac_accepted(fetched.mac, route_keys.expected(
            time.time_ns() // 1_000_000, attempt.delay_message_id, attempt.generation,
            attempt_id)):
        raise NereusError(
            f"{reference} carries attempt {attempt_id} but its evidence MAC does not verify "
            f"under route {shard.route}'s key: it was not written by this route's engine",
            hint="check the key (<home>/secrets) matches the publishing home's, or pass "
            "--unverified")
    return f"verified {reference}: attempt id and evidence MAC match"


def _attempt_shard(env: Env, attempt_id: str) -> ShardId:
    """The shard holding ``attempt_id``: asked of the engine (open attempts), else read from
    each database (read-only, safe beside a running engine; it also finds settled attempts,
    so re-running a resolve that applied reports its first result)."""
    from nereus.cli.mutation import every_shard
    from nereus.errors import NotFound
    from nereus.state import keys
    from nereus.state.store import ShardStore

    if env.engine_running():
        for found in env.admin().get("/v1/attempts")["attempts"]:
            if found["attempt_id"] == attempt_id:
                return env.shard(found["shard"])
    for shard in every_shard(env):
        path = env.layout.shard_state(shard)
        if not (path / "CURRENT").exists():
            continue
        with ShardStore.open(path, read_only=True) as store:
            if store.get(keys.attempt_key(attempt_id)) is not None:
                return shard
    raise NotFound(f"no attempt {attempt_id} on any shard of {env.home}",
                   hint="`nereus attempt list` shows the open ones; give --shard if you know it")
