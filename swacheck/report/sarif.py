"""SARIF 2.1.0, the format code-scanning services ingest.

As ruff's: every result is an ``error`` (ruff's severity for every finding, as in its
JSON), and a finding's fix is the result's ``fixes`` (SARIF's ``artifactChanges``: each
edit a ``deletedRegion`` and the ``insertedContent`` replacing it; unsafe fixes too,
as ruff writes them). Each rule carries its page as ``help`` (what GitHub shows as the
alert's help), and its URL.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from swacheck import __version__
from swacheck.engine.codes import ENGINE_CODES
from swacheck.finding import Finding, Fix, Position
from swacheck.report.context import PLAIN_CONTEXT, ReportContext
from swacheck.report.urls import rule_url

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = "error"


def _descriptor(
    code: str, name: str, summary: str, description: str, page: str, enabled: bool
) -> dict[str, Any]:
    return {
        "id": code,
        "name": name,
        "shortDescription": {"text": summary},
        "fullDescription": {"text": description},
        "help": {"text": page, "markdown": page},
        "helpUri": rule_url(code),
        "defaultConfiguration": {"enabled": enabled, "level": LEVEL},
    }


def _rules() -> list[dict[str, Any]]:
    from swacheck.docs import pages, render_engine_code
    from swacheck.rules import all_rules

    page = pages()
    described = [
        _descriptor(rule.code, rule.name, rule.summary, rule.documentation(), page[rule.code], True)
        for rule in all_rules()
    ]
    described += [
        _descriptor(
            code.code,
            code.name,
            code.summary,
            render_engine_code(code),
            page[code.code],
            code.default,
        )
        for code in ENGINE_CODES
    ]
    return described


def _region(start: Position, end: Position) -> dict[str, int]:
    return {
        "startLine": start.row,
        "startColumn": start.column + 1,
        "endLine": end.row,
        "endColumn": end.column + 1,
    }


def _fixes(fix: Fix, uri: str) -> list[dict[str, Any]]:
    replacements = []
    for edit in fix.edits:
        replacement: dict[str, Any] = {"deletedRegion": _region(edit.start, edit.end)}
        if edit.content:
            replacement["insertedContent"] = {"text": edit.content}
        replacements.append(replacement)
    change = {"artifactLocation": {"uri": uri}, "replacements": replacements}
    return [{"description": {"text": fix.message}, "artifactChanges": [change]}]


def _result(finding: Finding, rule_index: dict[str, int]) -> dict[str, Any]:
    uri = PurePath(finding.path).as_posix()
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "ruleIndex": rule_index[finding.code],
        "level": LEVEL,
        "message": {"text": finding.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": uri},
                    "region": _region(finding.start, finding.end),
                }
            }
        ],
    }
    if finding.fix is not None:
        result["fixes"] = _fixes(finding.fix, uri)
    return result


def render(findings: Sequence[Finding], context: ReportContext = PLAIN_CONTEXT) -> str:
    rules = _rules()
    rule_index = {rule["id"]: i for i, rule in enumerate(rules)}
    document = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "swacheck",
                        "version": __version__,
                        "informationUri": "https://github.com/swacheck/swacheck",
                        "rules": rules,
                    }
                },
                "results": [_result(f, rule_index) for f in findings],
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"
