"""Nereus Delay: durable delayed-message scheduling for Kafka and Pulsar.

The packages directly under ``nereus`` (records, machine, state, framing, client, ...)
are the deterministic core: no threads, clocks or network. ``nereus.engine`` is the
runtime, ``nereus.cli`` and ``nereus.tui`` are the front ends (see docs/ARCHITECTURE.md).
"""

__version__ = "0.2.0.dev0"
