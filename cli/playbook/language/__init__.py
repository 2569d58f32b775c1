"""The playbook language: pure functions of a playbook's text and the commands' answers.

The model (``model``); TOML loading (``load``); the condition language (``tokens``,
``tree``, ``parser``, ``expr``); templates and command words (``template``,
``command``); planning (``plan``); the journal's records (``journal``) and the documents
the commands print (``documents``). Nothing here runs a process, opens a file, waits or
prints: an import-linter ``forbidden`` contract whose source is this whole package (a new
module here is covered without editing it) keeps out the runtime, the front ends, the
running half of ``nereus.cli.playbook`` (``runner``, ``invoke``, ``journal_file``,
``catalog``) and subprocess, threads and sockets.
"""
