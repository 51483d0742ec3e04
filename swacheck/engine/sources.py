"""One file as the engine carries it between its stages, and the names it goes by."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from swacheck.config import Config


@dataclass
class Source:
    # Its name in the project index (facts, messages that cite it): relative to the
    # project root where there is one, else as shown.
    key: str
    # The path as findings show it (relative to the working directory where possible).
    display: str
    data: bytes
    # Its path relative to the configuration's root (what ``per-file-ignores`` match).
    relative: str = ""
    # Whether some enabled rule's triggers occur (``--no-prefilter`` parses the others too).
    relevant: bool = True
    # Whether findings are asked for it (given, or under a given folder), not only its facts.
    report: bool = False
    # Position in the audit's list of sources: the file's key in worker processes.
    number: int = 0


def display_path(path: str | Path) -> str:
    """``path`` relative to the working directory where it lies below it, else as given."""
    text = os.fspath(path)
    if not os.path.isabs(text) and not text.startswith(".."):
        return os.path.normpath(text)
    try:
        return os.path.relpath(text)
    except ValueError:
        return text


def relative_to_root(path: Path, config: Config) -> str:
    """``path`` relative to the configuration's root (what ``per-file-ignores`` match)."""
    root = config.root
    if root is not None:
        try:
            return path.resolve().relative_to(root).as_posix()
        except ValueError:
            pass
    return path.as_posix()
