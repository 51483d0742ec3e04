"""GitHub Actions workflow commands: one ``::warning`` annotation per finding."""

from __future__ import annotations

from collections.abc import Sequence

from swacheck.finding import Finding
from swacheck.report.style import PLAIN, Style


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def render(findings: Sequence[Finding], style: Style = PLAIN) -> str:
    lines = []
    for f in findings:
        props = (
            f"file={_escape_property(f.path)},line={f.start.row},col={f.start.column + 1},"
            f"endLine={f.end.row},endColumn={f.end.column + 1},title={f.code}"
        )
        lines.append(f"::warning {props}::{_escape_data(f'{f.code} {f.message}')}\n")
    return "".join(lines)
