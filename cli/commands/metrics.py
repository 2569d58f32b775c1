"""``nereus metrics``: the engine's Prometheus metrics, read through the admin socket.

The same text ``[metrics] listen`` serves at ``/metrics`` (with ``--workers N``, every
worker process's merged by the front door), so an operator can read it, or pipe it to
``promtool check metrics``, without opening a port. ``--json``: one document holding the
text. Nothing Prometheus is imported here: the engine renders the exposition.
"""

from __future__ import annotations

import sys

import typer

from nereus.cli.context import Env


def metrics(ctx: typer.Context) -> None:
    """Print the engine's Prometheus metrics (text exposition format; needs the engine).

    Names, units and labels: docs/ops/README.md. With `[metrics] listen = "HOST:PORT"` in
    nereus.toml the engine also serves them at http://HOST:PORT/metrics for Prometheus.
    """
    import msgspec

    from nereus.adapters.admin.wire import MetricsExposition

    env: Env = ctx.obj
    document = msgspec.convert(env.admin().get("/v1/metrics"), MetricsExposition)
    if env.output.json_mode:
        env.output.emit(msgspec.to_builtins(document), lambda _: None)
        return
    sys.stdout.write(document.exposition)
    sys.stdout.flush()
