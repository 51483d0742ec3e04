"""One audited file as the engine carries it between its stages."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from swacheck.config import Config

if TYPE_CHECKING:
    from swacheck.engine.parse import Parsed


@dataclass
class Source:
    path: Path
    # The path as findings show it (relative to the working directory where possible).
    display: str
    data: bytes
    # Whether some enabled rule's triggers occur (``--no-prefilter`` parses the others too).
    relevant: bool = True
    parsed: Parsed | None = None
    # Position in the audit's list of sources: the file's key in worker processes.
    number: int = 0


def display_path(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def relative_to_root(path: Path, config: Config) -> str:
    """``path`` relative to the configuration's root (what ``per-file-ignores`` match)."""
    root = config.root
    if root is not None:
        try:
            return path.resolve().relative_to(root).as_posix()
        except ValueError:
            pass
    return path.as_posix()
