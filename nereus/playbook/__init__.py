"""Playbooks: scripted runbooks for recurring operator procedures (the model, TOML
loading, the condition language, planning and the run journal). Pure: running the steps
is the engine's job (``nereus.engine.playbooks``), asking the operator the CLI's."""
