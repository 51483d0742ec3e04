"""Suppression comments, with ruff's syntax, and the report of unused ones.

- ``# noqa: SWA002`` (or a bare ``# noqa``) on a finding's row suppresses it;
- ``# swacheck: noqa`` anywhere in a file, on a line of its own, suppresses every
  finding of the file, and ``# swacheck: noqa: SWA002`` those of the codes it names
  (ruff's ``# ruff: noqa``);
- a ``# noqa`` naming an SWA code of a rule that ran on the file and suppressed nothing
  on that row is itself a finding, ``SWA100`` (ruff's RUF100), when that code is
  selected. Bare ``# noqa`` comments and other tools' codes are left alone.

Comments are read with :mod:`tokenize` from the file's bytes (so a ``# noqa`` in a
string is not one, and the declared encoding is honoured).

Where a finding's ``# noqa`` goes is ruff's answer: on the finding's row, except where
that row is joined to the next one — by a backslash continuation, or by a string
spanning rows — where no comment can end it; there it goes on the last row of the
joined rows (:func:`noqa_rows`).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass

from swacheck.engine.decoding import UndecodableSource, decode_source
from swacheck.finding import UNUSED_NOQA_CODE, Edit, Finding, Fix, Position

_CODE_LIST = r"[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*"
_NOQA = re.compile(rf"#\s*noqa(?::\s*(?P<codes>{_CODE_LIST}))?", re.IGNORECASE)
_FILE_NOQA = re.compile(rf"#\s*swacheck\s*:\s*noqa(?::\s*(?P<codes>{_CODE_LIST}))?", re.IGNORECASE)
_SWA_CODE = re.compile(r"SWA[0-9]+\Z")


@dataclass(frozen=True)
class Suppression:
    row: int
    # ``None``: a bare suppression comment (no codes) covers every code.
    codes: frozenset[str] | None
    # Where the directive lies on its row: columns and text.
    start: int = 0
    end: int = 0
    text: str = ""
    # Where a fix removing the whole directive starts (the blanks before a bare comment).
    removal_start: int = 0

    def covers(self, code: str) -> bool:
        return self.codes is None or code in self.codes


@dataclass(frozen=True)
class Suppressions:
    lines: dict[int, Suppression]
    # ``# swacheck: noqa`` directives (file-level).
    file: tuple[Suppression, ...] = ()

    def file_covers(self, code: str) -> bool:
        return any(s.covers(code) for s in self.file)

    def suppresses(self, finding: Finding) -> bool:
        if self.file_covers(finding.code):
            return True
        line = self.lines.get(finding.noqa_row or finding.start.row)
        return line is not None and line.covers(finding.code)


NONE = Suppressions({})


def _codes(text: str | None) -> frozenset[str] | None:
    return frozenset(c.upper() for c in re.split(r"[\s,]+", text.strip())) if text else None


def suppressions(data: bytes | str) -> Suppressions:
    """Every suppression comment of a file (real comments only, not strings)."""
    try:
        if isinstance(data, bytes):
            if b"noqa" not in data.lower():
                return NONE
            data = decode_source(data).text
        if "noqa" not in data.lower():
            return NONE
        # Universal newlines: rows must count a lone ``\r`` as libcst does.
        tokens = list(tokenize.generate_tokens(io.StringIO(data, newline=None).readline))
    except (tokenize.TokenError, SyntaxError, UndecodableSource):
        return NONE
    lines: dict[int, Suppression] = {}
    file: list[Suppression] = []
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        row, column = token.start
        whole = _FILE_NOQA.match(token.string)
        if whole is not None:
            if not token.line[:column].strip():  # on a line of its own, as ruff requires
                file.append(Suppression(row, _codes(whole.group("codes"))))
            continue
        match = _NOQA.search(token.string)
        if match is not None:
            start = column + match.start()
            if match.start() == 0 and match.end() == len(token.string.rstrip()):
                # The comment is only the directive: removing it takes the blanks before it.
                start = len(token.line[:column].rstrip())
            lines[row] = Suppression(
                row,
                _codes(match.group("codes")),
                column + match.start(),
                column + match.end(),
                match.group(0),
                start,
            )
    return Suppressions(lines, tuple(file))


def noqa_rows(text: str) -> dict[int, int]:
    """For each row joined to a later one (a backslash continuation, a token such as a
    triple-quoted string spanning rows), the last row of the joined rows: where a
    comment for it can go. Rows not in the mapping take their own comments."""
    joined: list[tuple[int, int]] = []
    try:
        tokens = tokenize.generate_tokens(io.StringIO(text, newline=None).readline)
        previous: tokenize.TokenInfo | None = None
        for token in tokens:
            if token.start[0] < token.end[0]:  # a string (or f-string part) spanning rows
                joined.append((token.start[0], token.end[0]))
            if (
                previous is not None
                and previous.type not in (tokenize.NEWLINE, tokenize.NL)
                and token.start[0] > previous.end[0]
                and token.type != tokenize.ENDMARKER
            ):  # nothing but a backslash continuation ends a row without a newline token
                joined.append((previous.end[0], token.start[0]))
            if token.type not in (tokenize.INDENT, tokenize.DEDENT):
                previous = token
    except (tokenize.TokenError, SyntaxError):
        pass
    rows: dict[int, int] = {}
    start = end = 0
    for first, last in sorted(joined):
        if first <= end:
            end = max(end, last)
            continue
        rows.update((row, end) for row in range(start, end))
        start, end = first, last
    rows.update((row, end) for row in range(start, end))
    return rows


def unused(
    path: str,
    found: Suppressions,
    ran: Iterable[str],
    used: Iterable[tuple[int, str]],
    known: Iterable[str],
) -> list[Finding]:
    """SWA100 for each ``# noqa`` whose SWA codes suppressed nothing.

    ``ran``: codes of the rules that ran on the file (a code of a rule that did not run
    cannot be judged); ``used``: the (row, code) pairs the comments suppressed;
    ``known``: every code swacheck has (an SWA code outside it is reported as unknown).
    """
    ran_codes, used_pairs, known_codes = set(ran), set(used), set(known)
    findings = []
    for row, directive in sorted(found.lines.items()):
        if directive.codes is None:
            continue
        swa = {c for c in directive.codes if _SWA_CODE.match(c)}
        unknown = sorted(c for c in swa if c not in known_codes)
        idle = sorted(c for c in swa if c in ran_codes and (row, c) not in used_pairs)
        if not (unknown or idle):
            continue
        parts = []
        if idle:
            parts.append("unused: " + ", ".join(f"`{c}`" for c in idle))
        if unknown:
            parts.append("unknown: " + ", ".join(f"`{c}`" for c in unknown))
        keep = [c for c in _ordered_codes(directive) if c not in idle and c not in unknown]
        findings.append(
            Finding(
                code=UNUSED_NOQA_CODE,
                message=f"Unused `noqa` directive ({'; '.join(parts)})",
                path=path,
                start=Position(row, directive.start),
                end=Position(row, directive.end),
                fix=_removal(directive, keep),
                noqa_row=None,
            )
        )
    return findings


def _ordered_codes(directive: Suppression) -> list[str]:
    match = _NOQA.match(directive.text)
    codes = match.group("codes") if match else ""
    return [c.upper() for c in re.split(r"[\s,]+", (codes or "").strip()) if c]


def _removal(directive: Suppression, keep: list[str]) -> Fix:
    """Drop the codes that suppress nothing, or the whole directive if none is left."""
    row = directive.row
    if keep:
        text = f"# noqa: {', '.join(keep)}"
        edit = Edit(Position(row, directive.start), Position(row, directive.end), text)
        return Fix("Remove the unused codes from the `noqa` directive", (edit,))
    edit = Edit(Position(row, directive.removal_start), Position(row, directive.end), "")
    return Fix("Remove the unused `noqa` directive", (edit,))
