"""``# noqa`` suppression comments, with ruff's syntax."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

_NOQA = re.compile(
    r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE
)


@dataclass(frozen=True)
class Suppression:
    row: int
    # ``None``: a bare suppression comment (no codes) covers every code on the row.
    codes: frozenset[str] | None

    def covers(self, code: str) -> bool:
        return self.codes is None or code in self.codes


def suppressions(text: str) -> dict[int, Suppression]:
    """Every ``# noqa`` comment of a parsed file, by row (real comments only, not strings)."""
    found: dict[int, Suppression] = {}
    if "noqa" not in text.lower():
        return found
    try:
        # Universal newlines: rows must count a lone ``\r`` as libcst does.
        tokens = list(tokenize.generate_tokens(io.StringIO(text, newline=None).readline))
    except (tokenize.TokenError, SyntaxError):
        return found
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        match = _NOQA.search(token.string)
        if match is None:
            continue
        codes = match.group("codes")
        parsed = frozenset(c.upper() for c in re.split(r"[\s,]+", codes.strip())) if codes else None
        found[token.start[0]] = Suppression(token.start[0], parsed)
    return found
