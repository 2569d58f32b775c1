"""``nereus engine start --workers N``: one home's shards spread over N worker processes,
each a member of the home's embedded cluster, behind one front door (``front_door``)."""
