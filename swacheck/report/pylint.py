"""``path:line: [CODE] message``: pylint's parseable format (ruff's ``pylint``)."""

from __future__ import annotations

from collections.abc import Sequence

from swacheck.finding import Finding
from swacheck.report.concise import shown_path
from swacheck.report.context import PLAIN_CONTEXT, ReportContext


def render(findings: Sequence[Finding], context: ReportContext = PLAIN_CONTEXT) -> str:
    return "".join(
        f"{shown_path(f.path)}:{f.start.row}: [{f.code}] {f.message}\n" for f in findings
    )
