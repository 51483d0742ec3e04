"""Azure Pipelines logging commands: one ``##vso[task.logissue ...]`` error per finding,
as ruff's ``azure`` format writes it (absolute file, row, column, code, then the
message). Values are escaped as the agent reads them, so a name or message holding
``;``, ``]`` or a newline cannot end the command early (ruff writes them as they are)."""

from __future__ import annotations

from collections.abc import Sequence

from swacheck.finding import Finding
from swacheck.report.context import PLAIN_CONTEXT, ReportContext

# The agent's escapes (azure-pipelines-task-lib): the message's, then a property's.
_MESSAGE = (("%", "%AZP25"), ("\r", "%0D"), ("\n", "%0A"))
_PROPERTY = (*_MESSAGE, (";", "%3B"), ("]", "%5D"))


def _escaped(value: str, escapes: tuple[tuple[str, str], ...]) -> str:
    for char, escape in escapes:
        value = value.replace(char, escape)
    return value


def render(findings: Sequence[Finding], context: ReportContext = PLAIN_CONTEXT) -> str:
    return "".join(
        "##vso[task.logissue type=error"
        f";sourcepath={_escaped(context.texts.absolute(f.path), _PROPERTY)}"
        f";linenumber={f.start.row};columnnumber={f.start.column + 1}"
        f";code={f.code};]{_escaped(f.message, _MESSAGE)}\n"
        for f in findings
    )
