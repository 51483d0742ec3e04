"""A JSON array with ruff's field names, so tools that read ``ruff --output-format json`` work."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from swacheck.finding import Finding, Fix, Position
from swacheck.report.style import PLAIN, Style
from swacheck.report.urls import rule_url


def _location(position: Position) -> dict[str, int]:
    return {"row": position.row, "column": position.column + 1}


def _fix(fix: Fix | None) -> dict[str, Any] | None:
    if fix is None:
        return None
    return {
        "applicability": fix.applicability.value,
        "message": fix.message,
        "edits": [
            {
                "content": edit.content,
                "location": _location(edit.start),
                "end_location": _location(edit.end),
            }
            for edit in fix.edits
        ],
    }


def as_dict(finding: Finding) -> dict[str, Any]:
    return {
        "code": finding.code,
        "message": finding.message,
        "filename": finding.path,
        "location": _location(finding.start),
        "end_location": _location(finding.end),
        "fix": _fix(finding.fix),
        "url": rule_url(finding.code),
        "noqa_row": finding.noqa_row,
    }


def render(findings: Sequence[Finding], style: Style = PLAIN) -> str:
    return json.dumps([as_dict(f) for f in findings], indent=2) + "\n"
