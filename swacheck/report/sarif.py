"""SARIF 2.1.0, the format code-scanning services ingest."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from swacheck import __version__
from swacheck.finding import PARSE_ERROR_CODE, Finding
from swacheck.report.style import PLAIN, Style
from swacheck.report.urls import rule_url

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _rules() -> list[dict[str, Any]]:
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
    described.append(
        {
            "id": PARSE_ERROR_CODE,
            "name": "parse-error",
            "shortDescription": {"text": "The file could not be parsed."},
            "defaultConfiguration": {"level": "error"},
        }
    )
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


def render(findings: Sequence[Finding], style: Style = PLAIN) -> str:
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
