"""ruff's JSON, field for field (``json``: one array; ``json-lines``: one object a line),
so tools that read ``ruff check --output-format json`` read swacheck's.

``filename`` is absolute, columns are 1-based, ``cell`` is always ``null`` (no
notebooks), ``severity`` is ``error`` for every finding, as ruff's are.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from swacheck.finding import Finding, Fix, Position
from swacheck.report.context import PLAIN_CONTEXT, ReportContext
from swacheck.report.urls import rule_url


def _location(position: Position) -> dict[str, int]:
    return {"column": position.column + 1, "row": position.row}


def _fix(fix: Fix | None) -> dict[str, Any] | None:
    if fix is None:
        return None
    return {
        "applicability": fix.applicability.value,
        "edits": [
            {
                "content": edit.content,
                "end_location": _location(edit.end),
                "location": _location(edit.start),
            }
            for edit in fix.edits
        ],
        "message": fix.message,
    }


def as_dict(finding: Finding, context: ReportContext = PLAIN_CONTEXT) -> dict[str, Any]:
    """One finding as ruff's JSON object (its keys in ruff's order)."""
    return {
        "cell": None,
        "code": finding.code,
        "end_location": _location(finding.end),
        "filename": context.texts.absolute(finding.path),
        "fix": _fix(finding.fix),
        "location": _location(finding.start),
        "message": finding.message,
        "name": context.names.get(finding.code, finding.code),
        "noqa_row": finding.noqa_row,
        "severity": "error",
        "url": rule_url(finding.code),
    }


def render(findings: Sequence[Finding], context: ReportContext = PLAIN_CONTEXT) -> str:
    return json.dumps([as_dict(f, context) for f in findings], indent=2) + "\n"


def render_lines(findings: Sequence[Finding], context: ReportContext = PLAIN_CONTEXT) -> str:
    return "".join(json.dumps(as_dict(f, context), separators=(",", ":")) + "\n" for f in findings)
