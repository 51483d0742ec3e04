"""GitHub Actions workflow commands: one ``::error`` annotation per finding, as ruff's
``github`` format writes them (title, absolute file, start and end, then the finding's
concise line and its fix as help)."""

from __future__ import annotations

from collections.abc import Sequence

from swacheck.finding import Finding
from swacheck.report.concise import shown_path
from swacheck.report.context import PLAIN_CONTEXT, ReportContext


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def render(findings: Sequence[Finding], context: ReportContext = PLAIN_CONTEXT) -> str:
    lines = []
    for f in findings:
        props = ",".join(
            [
                f"title={_escape_property(f'swacheck ({f.code})')}",
                f"file={_escape_property(context.texts.absolute(f.path))}",
                f"line={f.start.row}",
                f"col={f.start.column + 1}",
                f"endLine={f.end.row}",
                f"endColumn={f.end.column + 1}",
            ]
        )
        text = f"{shown_path(f.path)}:{f.start.row}:{f.start.column + 1}: {f.code} {f.message}"
        if f.fix is not None:
            text += f"\n  help: {f.fix.message}"
        lines.append(f"::error {props}::{_escape_data(text)}\n")
    return "".join(lines)
