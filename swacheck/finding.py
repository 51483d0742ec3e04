"""What an audit produces: findings, and the text edits that fix them.

Positions are 1-based rows and 0-based character columns, as libcst reports
them; reporters convert to each output format's convention.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Applicability(str, Enum):
    """How far a fix can be trusted (ruff's vocabulary)."""

    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True, order=True)
class Position:
    row: int
    column: int


@dataclass(frozen=True)
class Edit:
    """Replace the text between ``start`` and ``end`` (exclusive) by ``content``."""

    start: Position
    end: Position
    content: str


@dataclass(frozen=True)
class Fix:
    message: str
    edits: tuple[Edit, ...]
    applicability: Applicability = Applicability.SAFE


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    path: str
    start: Position
    end: Position
    fix: Fix | None = None
    # The row a suppression comment (noqa) must sit on to suppress this finding.
    noqa_row: int | None = None
    # Extra notes (e.g. which path misses an invalidation) kept out of the one-line message.
    notes: tuple[str, ...] = field(default=())

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.start.row, self.start.column, self.code)


# A file that cannot be analysed (missing, unreadable, undecodable, a syntax error, NUL
# bytes, beyond the per-file limits) is a finding.
PARSE_ERROR_CODE = "SWA999"
# A noqa comment naming an SWA code that suppressed nothing (off unless selected).
UNUSED_NOQA_CODE = "SWA100"
