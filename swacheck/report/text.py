"""``path:line:col: CODE message`` — the convention editors and CI annotators parse."""

from __future__ import annotations

from collections.abc import Sequence

from swacheck.finding import Finding


def format_finding(finding: Finding) -> str:
    marker = " [*]" if finding.fix is not None else ""
    return (
        f"{finding.path}:{finding.start.row}:{finding.start.column + 1}: "
        f"{finding.code}{marker} {finding.message}"
    )


def render(findings: Sequence[Finding]) -> str:
    return "".join(format_finding(f) + "\n" for f in findings)
