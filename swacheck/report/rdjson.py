"""reviewdog's diagnostic format (rdjson), as ruff's ``rdjson`` writes it: one document,
each finding with its code and page, absolute path, range (1-based columns) and its
fix's edits as ``suggestions``, for ``reviewdog -f=rdjson``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from swacheck.finding import Finding, Position
from swacheck.report.context import PLAIN_CONTEXT, ReportContext
from swacheck.report.urls import rule_url

SOURCE = {"name": "swacheck", "url": "https://github.com/swacheck/swacheck"}


def _range(start: Position, end: Position) -> dict[str, Any]:
    return {
        "end": {"column": end.column + 1, "line": end.row},
        "start": {"column": start.column + 1, "line": start.row},
    }


def _diagnostic(finding: Finding, context: ReportContext) -> dict[str, Any]:
    diagnostic: dict[str, Any] = {
        "code": {"url": rule_url(finding.code), "value": finding.code},
        "location": {
            "path": context.texts.absolute(finding.path),
            "range": _range(finding.start, finding.end),
        },
        "message": finding.message,
    }
    if finding.fix is not None:
        diagnostic["suggestions"] = [
            {"range": _range(edit.start, edit.end), "text": edit.content}
            for edit in finding.fix.edits
        ]
    return diagnostic


def render(findings: Sequence[Finding], context: ReportContext = PLAIN_CONTEXT) -> str:
    document = {
        "diagnostics": [_diagnostic(f, context) for f in findings],
        "severity": "WARNING",
        "source": SOURCE,
    }
    return json.dumps(document, indent=2) + "\n"
