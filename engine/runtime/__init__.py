"""What every engine thread leans on: the supervisor that restarts them, the event log they
report through, the engine's log files, the Trusted UTC clock and ids."""
