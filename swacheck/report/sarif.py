"""SARIF 2.1.0, the format code-scanning services ingest."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from swacheck import __version__
from swacheck.engine.codes import ENGINE_CODES
from swacheck.finding import PARSE_ERROR_CODE, Finding
from swacheck.report.context import PLAIN_CONTEXT, ReportContext
from swacheck.report.urls import rule_url

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _rules() -> list[dict[str, Any]]:
    from swacheck.docs import render_engine_code
    from swacheck.rules import all_rules

    described = [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": rule.documentation()},
            "helpUri": rule_url(rule.code),
            "defaultConfiguration": {"level": "warning"},
        }
        for rule in all_rules()
    ]
    described += [
        {
            "id": code.code,
            "name": code.name,
            "shortDescription": {"text": code.summary},
            "fullDescription": {"text": render_engine_code(code)},
            "helpUri": rule_url(code.code),
            "defaultConfiguration": {
                "level": "error" if code.code == PARSE_ERROR_CODE else "warning"
            },
        }
        for code in ENGINE_CODES
    ]
    return described


def _result(finding: Finding, rule_index: dict[str, int]) -> dict[str, Any]:
    region = {
        "startLine": finding.start.row,
        "startColumn": finding.start.column + 1,
        "endLine": finding.end.row,
        "endColumn": finding.end.column + 1,
    }
    return {
        "ruleId": finding.code,
        "ruleIndex": rule_index[finding.code],
        "level": "error" if finding.code == PARSE_ERROR_CODE else "warning",
        "message": {"text": finding.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": PurePath(finding.path).as_posix()},
                    "region": region,
                }
            }
        ],
    }


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
