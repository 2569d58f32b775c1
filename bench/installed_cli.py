"""The environment a bench runs the installed ``nereus`` in: an operator's, not this shell's.

An installed package runs from bytecode compiled once (pip compiles it at install, and
Python writes it on a first run). A shell with ``PYTHONDONTWRITEBYTECODE`` set, as some
development machines and containers have, makes every run of an editable install compile
each of its modules from source again: 17 ms of the 64 a ``nereus shard inspect`` took
here, none of which an operator pays. So the benches that time the CLI drop that variable
(their first, uncounted run writes the bytecode) and every ``NEREUS_*`` setting, and turn
colour off.
"""

from __future__ import annotations

import os


def cli_environ() -> dict[str, str]:
    """``os.environ`` without ``NEREUS_*`` and ``PYTHONDONTWRITEBYTECODE``, with
    ``NO_COLOR=1`` (module docstring)."""
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith("NEREUS_") and k != "PYTHONDONTWRITEBYTECODE"}
    environ["NO_COLOR"] = "1"
    return environ
