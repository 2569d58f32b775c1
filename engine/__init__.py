"""The Nereus Delay runtime (imperative shell), in rooms by role: ``hosting/`` (daemon, front
door and workers, cluster node, admin server), ``admin/`` (what the admin socket answers),
``process/`` (the Engine of one process), ``shard/`` (a shard's owner loop and its parts),
``publishing/`` and ``scheduler/``, ``metrics/`` and ``runtime/`` (supervisor, event log,
log files, Trusted UTC).

Installed as ``nereus.engine``; see docs/ARCHITECTURE.md for the layout.
"""
