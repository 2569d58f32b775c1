"""Checkpoints: the manifest format and verification (creation and upload live in the engine)."""
