"""How findings are shown on this run: colour, and which fixes ``--fix`` applies.

``[*]`` marks a finding ``--fix`` would fix with the flags given (a safe fix, or an
unsafe one under ``--unsafe-fixes``), as in ruff. Colour follows ruff's ``--color``:
``auto`` (the default) colours a terminal unless ``NO_COLOR`` is set, and
``FORCE_COLOR`` colours anything; ``always``/``never`` override both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TextIO

from swacheck.finding import Applicability, Finding

_BOLD, _RED, _CYAN, _RESET = "\x1b[1m", "\x1b[31m", "\x1b[36m", "\x1b[0m"
_UNDERLINE = "\x1b[4m"
_BRIGHT_RED, _BRIGHT_BLUE, _BRIGHT_CYAN = "\x1b[91m", "\x1b[94m", "\x1b[96m"


def wants_colour(when: str, stream: TextIO, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether to colour output on ``stream`` (``when``: ``auto``, ``always``, ``never``)."""
    if when != "auto":
        return when == "always"
    if environ.get("NO_COLOR"):
        return False
    if environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@dataclass(frozen=True)
class Style:
    colour: bool = False
    unsafe_fixes: bool = False

    def applies(self, finding: Finding) -> bool:
        """Whether ``--fix`` (with this run's ``--unsafe-fixes``) would fix ``finding``."""
        fix = finding.fix
        return fix is not None and (self.unsafe_fixes or fix.applicability is Applicability.SAFE)

    def hidden(self, finding: Finding) -> bool:
        """A fix that only ``--unsafe-fixes`` would apply."""
        return finding.fix is not None and not self.applies(finding)

    def bold(self, text: str) -> str:
        return f"{_BOLD}{text}{_RESET}" if self.colour else text

    def underline(self, text: str) -> str:
        return f"{_UNDERLINE}{text}{_RESET}" if self.colour else text

    def cyan(self, text: str) -> str:
        return f"{_CYAN}{text}{_RESET}" if self.colour else text

    def code(self, text: str) -> str:
        return f"{_BOLD}{_RED}{text}{_RESET}" if self.colour else text

    # ``full``'s snippets, in ruff's colours.
    def gutter(self, text: str) -> str:
        return f"{_BOLD}{_BRIGHT_BLUE}{text}{_RESET}" if self.colour and text.strip() else text

    def caret(self, text: str) -> str:
        return f"{_BOLD}{_BRIGHT_RED}{text}{_RESET}" if self.colour and text.strip() else text

    def label(self, text: str) -> str:
        return f"{_BOLD}{_BRIGHT_CYAN}{text}{_RESET}" if self.colour else text


# No colour, safe fixes only: what a pipe or a machine format gets.
PLAIN = Style()
