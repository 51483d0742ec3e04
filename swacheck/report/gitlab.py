"""GitLab Code Quality: a JSON array of issues, as ruff's ``gitlab`` format writes it.

Paths are relative to the project (``CI_PROJECT_DIR`` in a GitLab job, else the working
directory), as GitLab requires. A ``fingerprint`` is what GitLab compares between a
merge request and its target branch to tell new issues from old ones, so it is the
baseline's content fingerprint (code, file and the flagged line's text, not its row):
a finding whose line merely moved is not reported as new.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from swacheck.engine.baseline import entries
from swacheck.finding import Finding
from swacheck.report.context import PLAIN_CONTEXT, ReportContext


def project_dir(environ: Mapping[str, str] = os.environ) -> Path:
    return Path(environ.get("CI_PROJECT_DIR") or os.getcwd()).resolve()


def _issue(finding: Finding, file: str, fingerprint: str) -> dict[str, Any]:
    return {
        "check_name": finding.code,
        "description": f"{finding.code}: {finding.message}",
        "severity": "major",
        "fingerprint": fingerprint,
        "location": {
            "path": file,
            "positions": {
                "begin": {"line": finding.start.row, "column": finding.start.column + 1},
                "end": {"line": finding.end.row, "column": finding.end.column + 1},
            },
        },
    }


def render(findings: Sequence[Finding], context: ReportContext = PLAIN_CONTEXT) -> str:
    keyed = entries(findings, context.texts, project_dir())
    issues = [_issue(f, entry.file, entry.fingerprint()) for f, entry in keyed]
    return json.dumps(issues, indent=2) + "\n"
