"""Dashboard screens: the overview, drill-downs (shard, lane, message) and modals."""
