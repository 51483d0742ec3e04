"""What follows the findings, in ruff's words: the closing counts and fix hints,
``--statistics``, ``--show-fixes`` and what ``--diff`` would fix."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence

from swacheck.engine.result import AuditResult
from swacheck.finding import Finding
from swacheck.report.style import Style


def count(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def _unsafe(n: int) -> str:
    return f"{count(n, 'unsafe fix', 'unsafe fixes')} available with `--fix --unsafe-fixes`"


def closing(result: AuditResult, style: Style, fixing: bool) -> list[str]:
    """ "Found N findings." (with what ``--fix`` fixed) and how many ``--fix`` would fix."""
    left, fixed = len(result.findings), len(result.fixed)
    if fixing and fixed:
        lines = [f"Found {count(left + fixed, 'finding')} ({fixed} fixed, {left} remaining)."]
    elif left:
        lines = [f"Found {count(left, 'finding')}."]
    else:
        lines = ["All checks passed!"]
    applicable = sum(1 for f in result.findings if style.applies(f))
    hidden = sum(1 for f in result.findings if style.hidden(f))
    if applicable and hidden:
        lines.append(f"[{style.cyan('*')}] {applicable} fixable with `--fix` ({_unsafe(hidden)}).")
    elif applicable:
        lines.append(f"[{style.cyan('*')}] {applicable} fixable with `--fix`.")
    elif hidden:
        lines.append(f"{_unsafe(hidden)}.")
    return lines


def would_fix(result: AuditResult, style: Style) -> list[str]:
    """``--diff``'s closing line."""
    if result.fixed:
        return [f"Would fix {count(len(result.fixed), 'finding')}."]
    hidden = sum(1 for f in result.findings if style.hidden(f))
    if hidden:
        fixes = count(hidden, "fix", "fixes")
        return [f"No findings would be fixed ({fixes} available with `--unsafe-fixes`)."]
    return []


def show_fixes(fixed: Sequence[Finding], names: Mapping[str, str]) -> list[str]:
    """``--show-fixes``: what ``--fix`` fixed, per file and code."""
    if not fixed:
        return []
    lines = ["", f"Fixed {count(len(fixed), 'finding')}:"]
    by_file: dict[str, Counter[str]] = {}
    for finding in fixed:
        by_file.setdefault(finding.path, Counter())[finding.code] += 1
    for path, codes in sorted(by_file.items()):
        lines.append(f"- {path}:")
        for code, n in sorted(codes.items()):
            lines.append(f"    {n} × {code} ({names.get(code, code)})")
    return [*lines, ""]


def _rows(findings: Sequence[Finding], style: Style) -> list[tuple[str, int, int]]:
    """Per code: (code, count, how many ``--fix`` would fix), most frequent first."""
    total = Counter(f.code for f in findings)
    fixable = Counter(f.code for f in findings if style.applies(f))
    return [
        (code, n, fixable[code]) for code, n in sorted(total.items(), key=lambda i: (-i[1], i[0]))
    ]


def statistics_text(
    result: AuditResult, style: Style, names: Mapping[str, str], fixing: bool
) -> str:
    rows = _rows(result.findings, style)
    lines = []
    # As ruff: once some row is fixable, every row says whether it is (`[*]` or `[ ]`).
    marked = any(fixable for _, _, fixable in rows)
    if rows:
        width = max(len(str(n)) for _, n, _ in rows)
        code_width = max(len(code) for code, _, _ in rows)
        for code, n, fixable in rows:
            marker = (f"[{style.cyan('*')}] " if fixable else "[ ] ") if marked else ""
            lines.append(f"{n:>{width}}\t{code:<{code_width}}\t{marker}{names.get(code, code)}")
    for code, reason in sorted(result.inactive.items()):
        lines.append(f"-\t{code}\tinactive: {reason}")
    lines.extend(closing(result, style, fixing))
    return "".join(line + "\n" for line in lines)


def statistics_json(result: AuditResult, style: Style, names: Mapping[str, str]) -> str:
    rows = [
        {
            "code": code,
            "name": names.get(code, code),
            "count": n,
            "fixable": fixable > 0,
            "fixable_count": fixable,
        }
        for code, n, fixable in _rows(result.findings, style)
    ]
    return json.dumps(rows, indent=2) + "\n"
