"""Code actions: a finding's fix, a ``# noqa`` for it, and fixing the whole document.

Quick fixes come from the findings of the document's current version (its
:class:`~swacheck.server.documents.Report`): safe fixes are the preferred quick fix,
unsafe ones say so in their title. The suppression appends the code to a ``# noqa``
already on the finding's row, or adds one, and is offered only when the comment it
produces does suppress the finding (read back with :func:`swacheck.engine.noqa.suppressions`,
the engine's own reader). "Fix all" (``source.fixAll.swacheck``) is what
``swacheck audit --fix`` would write, computed by the engine on the document's text.

Every edit names the document version it was computed for, so an editor refuses to
apply an edit to text that has changed since.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from lsprotocol import types

from swacheck.engine import noqa_writer
from swacheck.engine.fixer import apply_fixes, rows
from swacheck.engine.noqa import Suppression, suppressions
from swacheck.finding import (
    PARSE_ERROR_CODE,
    UNUSED_NOQA_CODE,
    Applicability,
    Edit,
    Finding,
    Fix,
    Position,
)
from swacheck.server.documents import Report
from swacheck.server.positions import LineIndex

FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.swacheck"
QUICK_FIX = types.CodeActionKind.QuickFix.value
# Codes that a suppression comment on the row cannot silence (the engine reports them anyway).
_UNSUPPRESSIBLE = (PARSE_ERROR_CODE, UNUSED_NOQA_CODE)

# Makes the workspace edit of a list of text edits to one version of a document.
EditMaker = Callable[[Report, list[types.TextEdit]], types.WorkspaceEdit]


def wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Whether the client asked for actions of ``kind`` (kinds are hierarchical)."""
    return only is None or any(kind == k or kind.startswith(f"{k}.") for k in only)


def text_edits(edits: Iterable[Edit], lines: LineIndex) -> list[types.TextEdit]:
    return [types.TextEdit(range=lines.to_range(e.start, e.end), new_text=e.content) for e in edits]


def quick_fixes(
    report: Report, where: types.Range, only: Sequence[str] | None, make: EditMaker
) -> list[types.CodeAction]:
    """The fix and the suppression of each finding at ``where``."""
    if not wanted(QUICK_FIX, only):
        return []
    here = report.at(where)
    actions = [
        action
        for finding, diagnostic in here
        if (action := _fix_action(finding, diagnostic, report, make)) is not None
    ]
    if here:
        directives = suppressions(report.snapshot.text)
        for finding, diagnostic in here:
            action = _noqa_action(finding, diagnostic, report, directives.lines, make)
            if action is not None:
                actions.append(action)
    return actions


def _fix_action(
    finding: Finding, diagnostic: types.Diagnostic, report: Report, make: EditMaker
) -> types.CodeAction | None:
    fix = finding.fix
    if fix is None:
        return None
    safe = fix.applicability is Applicability.SAFE
    title = (
        f"{fix.message} ({finding.code})"
        if safe
        else (f"{fix.message} ({finding.code}, unsafe fix: review the result)")
    )
    return types.CodeAction(
        title=title,
        kind=QUICK_FIX,
        diagnostics=[diagnostic],
        is_preferred=safe,
        edit=make(report, text_edits(fix.edits, report.lines)),
    )


def noqa_edit(finding: Finding, report: Report, directives: dict[int, Suppression]) -> Edit | None:
    """The edit that makes a ``# noqa`` on the finding's row name its code, if one does."""
    if finding.code in _UNSUPPRESSIBLE:
        return None
    row = finding.noqa_row or finding.start.row
    edit = noqa_writer.noqa_edit(row, report.lines.line(row), directives.get(row), [finding.code])
    fixed, _ = apply_fixes(report.snapshot.text, [Fix("", (edit,))])
    written = suppressions(fixed).lines.get(row)
    return edit if written is not None and written.covers(finding.code) else None


def _noqa_action(
    finding: Finding,
    diagnostic: types.Diagnostic,
    report: Report,
    directives: dict[int, Suppression],
    make: EditMaker,
) -> types.CodeAction | None:
    edit = noqa_edit(finding, report, directives)
    if edit is None:
        return None
    row = finding.noqa_row or finding.start.row
    title = (
        f"Add {finding.code} to the `# noqa` comment on line {row}"
        if row in directives
        else f"Suppress {finding.code} with `# noqa: {finding.code}` on line {row}"
    )
    return types.CodeAction(
        title=title,
        kind=QUICK_FIX,
        diagnostics=[diagnostic],
        edit=make(report, text_edits([edit], report.lines)),
    )


def fix_all_action(report: Report, data: object) -> types.CodeAction:
    """The "fix all" action, its edit to be filled in by :func:`fix_all_edits`."""
    return types.CodeAction(
        title="swacheck: fix all auto-fixable findings", kind=FIX_ALL, data=data
    )


def fix_all_edits(report: Report, fixed: str) -> list[types.TextEdit]:
    """One edit turning the report's text into ``fixed``: the changed lines only, so the
    editor keeps the cursor and folds elsewhere."""
    old, new = report.lines.lines, rows(fixed)
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    start = types.Position(line=head, character=0)
    end = (
        types.Position(line=len(old) - tail, character=0)
        if tail or not old or old[-1].endswith(("\n", "\r"))
        else report.lines.to_lsp(Position(len(old), len(old[-1])))
    )
    return [
        types.TextEdit(
            range=types.Range(start=start, end=end), new_text="".join(new[head : len(new) - tail])
        )
    ]
