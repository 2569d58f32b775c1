"""The I/O adapters (installed as ``nereus.adapters``): everything the engine runtime and
the offline tools both need to reach the world outside the deterministic core.

Shard Logs (``shardlog/``: file, Kafka, Pulsar), object stores (``objectstore/``: local,
S3), checkpoints and their restore target checks, offline replay and the shard runner
that applies records to a store, checkpoint verification (deep and parallel), the admin
socket's client, the home's lock, private files, route secrets, and the state/log
continuity check. They import the core and nothing above: the runtime (``nereus.engine``:
daemon, shard loops, scheduler, publishers) and the front ends sit on top of them
(import-linter layers). See docs/ARCHITECTURE.md.
"""
