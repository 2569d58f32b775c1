"""The cluster's records, key schema and placement: what nodes agree on through the
coordinator (``docs/ARCHITECTURE.md`` "Cluster"). Pure: no coordinator, no clock."""
