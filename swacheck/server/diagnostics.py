"""Findings as LSP diagnostics.

Severity follows the SARIF output: a file that cannot be analysed (``SWA999``) is an
error, a rule's finding a warning; an unused ``# noqa`` (``SWA100``) is also tagged
unnecessary, so editors grey it out as they do unused code. Each rule's diagnostic
links to the rule's page (``codeDescription``, the JSON/SARIF ``url``; the engine's own
codes have no published page); the hover shows the page itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace import PositionCodec

from swacheck.engine.codes import engine_code
from swacheck.finding import PARSE_ERROR_CODE, UNUSED_NOQA_CODE, Finding
from swacheck.report.urls import rule_url
from swacheck.server.documents import Report, Snapshot
from swacheck.server.positions import LineIndex

SOURCE = "swacheck"


def diagnostic(finding: Finding, lines: LineIndex) -> types.Diagnostic:
    message = "\n".join([finding.message, *finding.notes])
    return types.Diagnostic(
        range=lines.to_range(finding.start, finding.end),
        message=message,
        severity=(
            types.DiagnosticSeverity.Error
            if finding.code == PARSE_ERROR_CODE
            else types.DiagnosticSeverity.Warning
        ),
        code=finding.code,
        code_description=(
            types.CodeDescription(href=rule_url(finding.code))
            if engine_code(finding.code) is None
            else None
        ),
        source=SOURCE,
        tags=[types.DiagnosticTag.Unnecessary] if finding.code == UNUSED_NOQA_CODE else None,
    )


def report(snapshot: Snapshot, findings: Sequence[Finding], codec: PositionCodec) -> Report:
    """The diagnostics of one audited snapshot, in the client's position encoding."""
    lines = LineIndex(snapshot.text, codec)
    ordered = tuple(sorted(findings, key=lambda f: f.sort_key))
    return Report(snapshot, lines, ordered, tuple(diagnostic(f, lines) for f in ordered))
