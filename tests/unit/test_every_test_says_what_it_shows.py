"""Every test says in a docstring what it shows: a reader learns the behaviour from the
sentence, and a test whose sentence no longer matches its body stands out in review."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent


def test_every_test_function_has_a_docstring() -> None:
    """Each ``test_*`` function under tests/ starts with a docstring."""
    missing = []
    for path in sorted(TESTS.rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and \
                    node.name.startswith("test_") and ast.get_docstring(node) is None:
                missing.append(f"{path.relative_to(TESTS.parent)}:{node.lineno} {node.name}")
    assert not missing, "tests without a docstring:\n" + "\n".join(missing)
