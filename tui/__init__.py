"""The live Textual dashboard, installed as ``nereus.tui``."""
