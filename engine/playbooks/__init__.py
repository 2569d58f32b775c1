"""Running playbooks: each step is the installed ``nereus`` run in a subprocess, judged by
the pure checks of ``nereus.playbook``, journalled line by line so a run can resume."""
