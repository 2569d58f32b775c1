"""The Nereus Delay runtime (imperative shell): shard runner, Shard Log backends, ...

Installed as ``nereus.engine``; see docs/ARCHITECTURE.md for the layout.
"""
