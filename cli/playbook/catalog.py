"""Where playbooks are found: the shipped ones (``nereus/_data/playbooks``, the repository's
``playbooks/``) and the operator's own in ``<home>/playbooks/*.toml``, which shadow a
shipped playbook of the same name (an operator can adapt a runbook without forking the
product)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import nereus
from nereus.cli.playbook.language.load import PLAYBOOK_NAME, load_playbook
from nereus.cli.playbook.language.model import Playbook
from nereus.errors import NotFound
from nereus.layout import HomeLayout

SHIPPED_DIR = Path(nereus.__file__).parent / "_data" / "playbooks"


@dataclass(frozen=True, slots=True)
class Found:
    name: str
    path: Path
    origin: str  # "shipped" | "home" | "file"
    shadows: bool = False  # a home playbook that hides a shipped one


def _scan(directory: Path) -> dict[str, Path]:
    if not directory.is_dir():
        return {}
    return {p.stem: p for p in sorted(directory.glob("*.toml"))
            if p.is_file() and PLAYBOOK_NAME.match(p.stem)}


def discover(home: Path, *, shipped: Path = SHIPPED_DIR) -> dict[str, Found]:
    """Every playbook by name: the home's first, then the shipped ones it does not shadow."""
    ours = _scan(shipped)
    theirs = _scan(HomeLayout(home).playbooks)
    found = {name: Found(name, path, "shipped") for name, path in ours.items()}
    for name, path in theirs.items():
        found[name] = Found(name, path, "home", shadows=name in ours)
    return dict(sorted(found.items()))


def locate(home: Path, name: str, *, shipped: Path = SHIPPED_DIR) -> Found:
    """The playbook called ``name``, or the file ``name`` when it ends in ``.toml``."""
    if name.endswith(".toml"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise NotFound(f"no playbook file {path}")
        return Found(path.stem, path, "file")
    found = discover(home, shipped=shipped)
    if name not in found:
        known = ", ".join(found) or "none"
        raise NotFound(f"no playbook named {name!r} (available: {known})",
                       hint="`nereus playbook list` shows them; your own go in "
                       f"{HomeLayout(home).playbooks}/NAME.toml")
    return found[name]


def read(found: Found) -> Playbook:
    """Load the playbook ``found`` names (PlaybookError says where it is wrong)."""
    return load_playbook(found.path.read_text(encoding="utf-8"), origin=str(found.path),
                         name=found.name, path=found.path)
