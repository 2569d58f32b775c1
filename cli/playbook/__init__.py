"""Playbooks: scripted runbooks for recurring operator procedures, a front-end feature of
the CLI (``nereus playbook list|show|run``).

The language half is pure — the subpackage ``language``: the model, TOML loading, the
condition language, templates and command words, planning and the journal's records,
checked by import-linter to import no runtime, front end or I/O client. The running half
— ``runner`` (each step is the installed ``nereus`` run in a subprocess by ``invoke``,
judged by the pure checks and journalled line by line by ``journal_file`` so a run can
resume) and ``catalog`` (the shipped and the home's playbook files) — does the I/O.
Nothing below the CLI imports this package.
"""
