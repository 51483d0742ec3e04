"""Writing ``# noqa`` comments: ``swacheck audit --add-noqa`` and the editor's quick fix.

A finding's code is added to the ``# noqa: ...`` already on its noqa row (the row ruff
would put it on: :func:`swacheck.engine.noqa.noqa_rows`, applied by the engine), after
the codes there and before anything that follows them; a row without one gets
``  # noqa: CODE`` after its code (and after any other comment, as ruff does). Nothing
else of the file changes: not its encoding, BOM, line ends or any other line. What is
written is read back with the engine's own reader (:func:`swacheck.engine.noqa.suppressions`)
and must suppress every finding it was written for and still parse, or the file is left
alone. Running it again adds nothing.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterable, Sequence

from swacheck.engine.decoding import LOSSY, UndecodableSource, decode_source
from swacheck.engine.fixer import apply_fixes, rows
from swacheck.engine.noqa import Suppression, suppressions
from swacheck.finding import Edit, Finding, Fix, Position


class NoqaNotWritten(Exception):
    """The comments could not be added to a file (the message says why); it is unchanged."""


def noqa_edit(
    row: int, line: str, directive: Suppression | None, codes: Sequence[str], reason: str = ""
) -> Edit:
    """The edit that makes row ``row`` (text ``line``, without its line end) carry a
    ``# noqa`` naming ``codes``; ``directive``: the ``# noqa`` already on the row."""
    if directive is not None and directive.codes is not None:
        end = Position(row, directive.end)
        return Edit(end, end, "".join(f", {code}" for code in codes))
    comment = f"  # noqa: {', '.join(codes)}" + (f" {reason}" if reason else "")
    return Edit(Position(row, len(line.rstrip())), Position(row, len(line)), comment)


def _parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def add_noqa(data: bytes, findings: Iterable[Finding], reason: str = "") -> tuple[bytes, int]:
    """``data`` (a file's bytes) with a ``# noqa`` for each finding that has a noqa row,
    and how many comments were added or extended; raises :class:`NoqaNotWritten`."""
    try:
        decoded = decode_source(data)
    except UndecodableSource as exc:
        raise NoqaNotWritten(f"cannot decode the file ({exc})") from None
    if decoded.lossy:
        raise NoqaNotWritten(LOSSY)
    text = decoded.text
    found = suppressions(text)
    wanted: dict[int, list[str]] = {}
    for finding in findings:
        row = finding.noqa_row
        directive = found.lines.get(row) if row is not None else None
        if row is None or (directive is not None and directive.covers(finding.code)):
            continue
        codes = wanted.setdefault(row, [])
        if finding.code not in codes:
            codes.append(finding.code)
    if not wanted:
        return data, 0
    lines = [line.rstrip("\r\n") for line in rows(text)]
    edits = [
        noqa_edit(row, lines[row - 1], found.lines.get(row), sorted(codes), reason)
        for row, codes in sorted(wanted.items())
        if row <= len(lines)
    ]
    new_text, _ = apply_fixes(text, [Fix("add noqa", (edit,)) for edit in edits])
    written = suppressions(new_text)
    for row, codes in wanted.items():
        directive = written.lines.get(row)
        if directive is None or not all(directive.covers(code) for code in codes):
            raise NoqaNotWritten(f"a `# noqa` on line {row} would not be read back as one")
    if _parses(text) and not _parses(new_text):
        raise NoqaNotWritten("the file would no longer parse")
    return decoded.encode(new_text), len(edits)
