"""What the server holds of an open document: the version it audited, and what it found.

pygls keeps the documents' current text (``TextDocumentSyncKind.Full``: the client sends
the whole text with each change, so no incremental edit is ever applied with
:meth:`str.splitlines`' idea of lines). An audit runs on a :class:`Snapshot` taken when
it starts; its :class:`Report` is what code actions and hovers answer from, as long as
the document is still at that version.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types

from swacheck.finding import Finding
from swacheck.server.positions import LineIndex


@dataclass(frozen=True)
class Snapshot:
    """One version of an open document."""

    uri: str
    path: Path
    version: int | None
    text: str


@dataclass(frozen=True)
class Report:
    """What the audit of one snapshot found, as findings and as the diagnostics shown."""

    snapshot: Snapshot
    lines: LineIndex
    findings: tuple[Finding, ...]
    # ``diagnostics[i]`` shows ``findings[i]``.
    diagnostics: tuple[types.Diagnostic, ...]

    def at(self, where: types.Range) -> list[tuple[Finding, types.Diagnostic]]:
        """The findings whose diagnostic range touches ``where``."""
        return [
            (finding, diagnostic)
            for finding, diagnostic in zip(self.findings, self.diagnostics, strict=True)
            if _touches(diagnostic.range, where)
        ]


def _key(position: types.Position) -> tuple[int, int]:
    return (position.line, position.character)


def _touches(a: types.Range, b: types.Range) -> bool:
    return _key(a.start) <= _key(b.end) and _key(b.start) <= _key(a.end)
