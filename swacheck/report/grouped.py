"""ruff's ``grouped`` format: each file's name, then its findings as ``row:col CODE [*]
message`` (rows right-aligned, columns left-aligned within the file), a blank line after
each file; the closing summary follows, as after ``concise``."""

from __future__ import annotations

from collections.abc import Sequence

from swacheck.finding import Finding
from swacheck.report.concise import code_and_message, shown_path
from swacheck.report.context import PLAIN_CONTEXT, ReportContext


def render(findings: Sequence[Finding], context: ReportContext = PLAIN_CONTEXT) -> str:
    style = context.style
    by_file: dict[str, list[Finding]] = {}
    for finding in findings:
        by_file.setdefault(finding.path, []).append(finding)
    out = []
    for path in sorted(by_file):
        group = by_file[path]
        rows = max(len(str(f.start.row)) for f in group)
        columns = max(len(str(f.start.column + 1)) for f in group)
        out.append(f"{style.underline(shown_path(path))}:\n")
        for f in group:
            row, column = str(f.start.row), str(f.start.column + 1)
            out.append(
                f"  {row:>{rows}}{style.cyan(':')}{column:<{columns}} "
                f"{code_and_message(f, style)}\n"
            )
        out.append("\n")
    return "".join(out)
