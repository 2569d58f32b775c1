"""The ``nereus`` operator CLI (Typer + Rich), installed as ``nereus.cli``."""
