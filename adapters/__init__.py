"""The I/O adapters (installed as ``nereus.adapters``): everything the engine runtime and
the offline tools both need to reach the world outside the deterministic core.

Rooms by role: ``backends/`` (Shard Logs, destinations, object stores, coordinators; each
broker's client code in ``backends/kafka`` and ``backends/pulsar``), ``offline/`` (the
shard runner, replay, verification, checkpoints, large payloads and their collection,
continuity checks, command lookup), ``cluster/`` (the cluster's records in a coordinator),
``admin/`` (the admin socket's client and wire, the engine process started from outside)
and ``home/`` (lock, private and durable files, route secrets). They import the core and
nothing above: the runtime (``nereus.engine``) and the front ends sit on top of them
(import-linter layers, and contracts between the rooms). See docs/ARCHITECTURE.md.
"""
