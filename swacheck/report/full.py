"""ruff's ``full`` format (its default): each finding with its source lines and carets
under what it flags, the fix as help with the change it makes, and notes.

    SWA002 [*] SWA-space location `out_cache_loc_swa` is created as int64 ...
      --> cuda_graph_runner.py:20:49
       |
    19 |         self.out_cache_loc = torch.zeros((bs,), dtype=torch.int32)
    20 |         self.out_cache_loc_swa = torch.zeros((bs,), dtype=torch.int64)
       |                                                         ^^^^^^^^^^^
       |
    help: Use torch.int32
    ...

Two rows of context either side (blank rows at the edges left out), as ruff shows.
Scripts that parse ``path:line:col:`` lines want ``concise``.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from swacheck.engine.fixer import apply_fixes
from swacheck.finding import Applicability, Finding
from swacheck.report.concise import shown_path
from swacheck.report.context import PLAIN_CONTEXT, ReportContext
from swacheck.report.style import Style

CONTEXT_ROWS = 2
# A span longer than this shows its first and last rows around a ``...``.
LONG_SPAN = 8
TAB = "    "


def _context(rows: list[str], first: int, last: int) -> tuple[int, int]:
    """The rows to show around rows ``first``..``last`` (1-based), blank edges trimmed."""
    start, end = max(1, first - CONTEXT_ROWS), min(len(rows), last + CONTEXT_ROWS)
    while start < first and not rows[start - 1].strip():
        start += 1
    while end > last and not rows[end - 1].strip():
        end -= 1
    return start, end


def _width(text: str) -> int:
    return len(text.replace("\t", TAB))


class _Snippet:
    """Rows and annotation lines in ruff's layout: ``NN | text``, ``   | ^^^``."""

    def __init__(self, style: Style, number_width: int, multiline: bool) -> None:
        self.style = style
        self.width = number_width
        self.multiline = multiline
        self.lines: list[str] = []
        self.ends_with_row = False

    def bar(self, number: str = "", mark: str = "+") -> str:
        return self.style.gutter(f"{number:>{self.width}} {'|' if mark == '+' else mark}")

    def row(self, number: int, text: str, span: str = "  ") -> None:
        prefix = span if self.multiline else ""
        self.lines.append(f"{self.bar(str(number))} {prefix}{text.replace(chr(9), TAB)}".rstrip())
        self.ends_with_row = True

    def annotation(self, text: str) -> None:
        self.lines.append(f"{self.bar()} {self.style.caret(text)}".rstrip())
        self.ends_with_row = False


def _snippet(finding: Finding, rows: list[str], style: Style) -> tuple[list[str], int]:
    """The snippet's lines and the width of its row numbers."""
    first, last = finding.start.row, max(finding.end.row, finding.start.row)
    if not rows or first > len(rows):
        return [], 1
    last = min(last, len(rows))
    start, end = _context(rows, first, last)
    multiline = last > first
    shown = [
        n
        for n in range(start, end + 1)
        if not (multiline and last - first > LONG_SPAN and first + 2 < n < last - 1)
    ]
    snippet = _Snippet(style, len(str(end)), multiline)
    snippet.lines.append(snippet.bar())
    previous = None
    for n in shown:
        if previous is not None and n != previous + 1:
            snippet.lines.append(style.gutter("..."))
        previous = n
        text = rows[n - 1]
        if not multiline:
            snippet.row(n, text)
            if n == first:
                column = _width(text[: finding.start.column])
                span = _width(text[finding.start.column : finding.end.column]) or 1
                snippet.annotation(" " * column + "^" * span)
        elif n == first:
            indent = len(text) - len(text.lstrip())
            if finding.start.column <= indent:
                snippet.row(n, text, style.caret("/") + " ")
            else:
                snippet.row(n, text)
                column = _width(text[: finding.start.column])
                snippet.annotation(" " + "_" * (column + 1) + "^")
        elif first < n <= last:
            snippet.row(n, text, style.caret("|") + " ")
            if n == last:
                column = max(1, _width(text[: finding.end.column]))
                snippet.annotation(style.caret("|" + "_" * column + "^"))
        else:
            snippet.row(n, text)
    if snippet.ends_with_row:
        snippet.lines.append(snippet.bar())
    return snippet.lines, snippet.width


def _fix_diff(finding: Finding, rows: list[str], style: Style) -> list[str]:
    """The change the finding's fix makes, as ruff shows it: kept rows numbered as they
    will be, removed rows ``-``, added rows ``+``, one row of context."""
    if finding.fix is None or not rows:
        return []
    text = "\n".join(rows) + "\n"
    fixed, applied = apply_fixes(text, [finding.fix])
    if not applied:
        return []
    new = fixed.split("\n")[:-1] if fixed.endswith("\n") else fixed.split("\n")
    matcher = difflib.SequenceMatcher(a=rows, b=new, autojunk=False)
    width = len(str(len(new)))
    lines = [style.gutter(f"{'':>{width}} |")]
    for group in matcher.get_grouped_opcodes(1):
        if lines[1:]:
            lines.append(style.gutter("..."))
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                for offset in range(a2 - a1):
                    number = b1 + offset + 1
                    row = new[b1 + offset].replace("\t", TAB)
                    lines.append(f"{style.gutter(f'{number:>{width}} |')} {row}".rstrip())
                continue
            for row in rows[a1:a2]:
                row = row.replace("\t", TAB)
                lines.append(f"{'':>{width}} {style.caret('-')} {row}".rstrip())
            for offset in range(b2 - b1):
                row = new[b1 + offset].replace("\t", TAB)
                number = f"{b1 + offset + 1:>{width}}"
                lines.append(f"{style.gutter(number)} {style.label('+')} {row}".rstrip())
    lines.append(style.gutter(f"{'':>{width}} |"))
    return lines


def format_finding(finding: Finding, context: ReportContext = PLAIN_CONTEXT) -> str:
    style = context.style
    marker = f" [{style.label('*')}]" if style.applies(finding) else ""
    lines = [f"{style.code(finding.code)}{marker} {style.bold(shown_path(finding.message))}"]
    rows = context.texts.rows(finding.path)
    snippet, width = _snippet(finding, rows, style)
    where = f"{shown_path(finding.path)}:{finding.start.row}:{finding.start.column + 1}"
    lines.append(f"{' ' * width}{style.gutter('-->')} {where}")
    lines.extend(snippet)
    for note in finding.notes:
        lines.append(f"{style.label('info')}: {note}")
    if finding.fix is not None:
        lines.append(f"{style.label('help')}{style.bold(': ' + finding.fix.message)}")
        lines.extend(_fix_diff(finding, rows, style))
        if finding.fix.applicability is Applicability.UNSAFE:
            lines.append(
                f"{style.label('note')}: This is an unsafe fix and may change runtime behavior"
            )
    return "\n".join(lines) + "\n"


def render(findings: Sequence[Finding], context: ReportContext = PLAIN_CONTEXT) -> str:
    return "".join(format_finding(f, context) + "\n" for f in findings)
