"""Hover: the page of each rule whose finding lies under the cursor.

The page is ``swacheck rule CODE`` (:func:`swacheck.docs.render_rule`, from the rule
class: what it flags, the invariant it guards and why breaking it is a bug, an
example, its fix's safety), followed by the link to the published page. A code named
in a ``# noqa`` comment under the cursor gets its page too, so a reader can see what a
suppression silences.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from lsprotocol import types

from swacheck.engine.codes import engine_code
from swacheck.report.urls import rule_url
from swacheck.server.documents import Report
from swacheck.server.positions import LineIndex

_CODE = re.compile(r"\bSWA[0-9]+\b")


def page(code: str) -> str | None:
    """``swacheck rule CODE``'s text (imports the rules, and libcst, on first use)."""
    from swacheck.docs import page_of

    return page_of(code)


def _inside(position: types.Position, where: types.Range) -> bool:
    at = (position.line, position.character)
    return (where.start.line, where.start.character) <= at <= (where.end.line, where.end.character)


def codes_at(report: Report | None, lines: LineIndex, position: types.Position) -> list[str]:
    """Codes of the findings under ``position`` and one named in a comment there."""
    codes: list[str] = []
    if report is not None:
        codes += [str(d.code) for d in report.diagnostics if _inside(position, d.range)]
    at = lines.from_lsp(position)
    text = lines.line(at.row)
    comment = text.find("#")
    for match in _CODE.finditer(text):
        if 0 <= comment < match.start() and match.start() <= at.column <= match.end():
            codes.append(match.group(0))
    return list(dict.fromkeys(codes))


def hover(codes: Iterable[str]) -> types.Hover | None:
    pages = [
        text.rstrip() if engine_code(code) else f"{text.rstrip()}\n\n[{code}]({rule_url(code)})"
        for code in codes
        if (text := page(code)) is not None
    ]
    if not pages:
        return None
    markup = types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(pages))
    return types.Hover(contents=markup)
