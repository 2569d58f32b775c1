"""Prometheus metrics: counted at the few hot points (``shard``), everything else read at
scrape time from state the engine already keeps (``collect``), merged across worker
processes (``exposition_merge``) and served over HTTP when ``[metrics] listen`` is set
(``listener``).

Only ``shard`` is imported on the hot path, and it imports no Prometheus code.
"""
