"""``path:line:col: CODE [*] message``, one line per finding: ruff's ``concise`` format,
the convention editors, ``grep`` and CI annotators parse."""

from __future__ import annotations

import re
from collections.abc import Sequence

from swacheck.finding import Finding
from swacheck.report.context import PLAIN_CONTEXT, ReportContext
from swacheck.report.style import PLAIN, Style

# Control characters in a file name would split or garble the line, and the bytes of a
# name that is not UTF-8 (surrogate escapes, as Python reads such names) would print as
# "?" or U+FFFD, naming no file: both are shown escaped.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\udc80-\udcff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(char: str) -> str:
    code = ord(char)
    return _NAMED.get(char) or f"\\x{code - 0xDC00 if code >= 0xDC00 else code:02x}"


def shown_path(path: str) -> str:
    """``path`` on one line: control characters and undecodable bytes escaped
    (``\\n``, ``\\x1b``, ``\\xff``)."""
    if not _CONTROL.search(path):
        return path
    return _CONTROL.sub(lambda m: _escaped(m.group()), path)


def code_and_message(finding: Finding, style: Style = PLAIN) -> str:
    """``CODE [*] message``: the ``[*]`` where ``--fix`` would fix it, as ruff marks it."""
    marker = f" [{style.cyan('*')}]" if style.applies(finding) else ""
    # A message may cite another file's path: escaped as the finding's own path is.
    return f"{style.code(finding.code)}{marker} {shown_path(finding.message)}"


def format_finding(finding: Finding, style: Style = PLAIN) -> str:
    sep = style.cyan(":")
    where = sep.join([style.bold(shown_path(finding.path)), str(finding.start.row)])
    return f"{where}{sep}{finding.start.column + 1}{sep} {code_and_message(finding, style)}"


def render(findings: Sequence[Finding], context: ReportContext = PLAIN_CONTEXT) -> str:
    return "".join(format_finding(f, context.style) + "\n" for f in findings)
