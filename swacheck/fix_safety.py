"""What a rule's fix promises: the one source of truth for fix safety.

A rule (or an engine code) declares each case of its fix: how far it can be trusted
(ruff's applicability) and, where it has more than one case, when each applies. Every
fix a finding carries must be one of the declared cases (:meth:`swacheck.rule.Rule.report`
refuses any other), ``--fix`` applies the safe ones and ``--unsafe-fixes`` the rest, and
the documentation — the rule's page (``swacheck rule``, ``docs/rules/``), ``swacheck
rules`` and README's table — is generated from the same declaration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from swacheck.finding import Applicability


@dataclass(frozen=True)
class FixCase:
    applicability: Applicability
    # When this case applies, in words that follow "when" (empty: the rule's only case).
    when: str = ""


def safe_fix(when: str = "") -> FixCase:
    return FixCase(Applicability.SAFE, when)


def unsafe_fix(when: str = "") -> FixCase:
    return FixCase(Applicability.UNSAFE, when)


def safety(cases: Sequence[FixCase]) -> str:
    """``none``, ``safe``, ``unsafe`` or ``safe/unsafe`` (it depends on the finding)."""
    kinds = {case.applicability for case in cases}
    if not kinds:
        return "none"
    if len(kinds) > 1:
        return "safe/unsafe"
    return next(iter(kinds)).value


def availability(cases: Sequence[FixCase]) -> str:
    """ruff's wording for ``rule --output-format json``'s ``fix``: a rule's fix depends
    on what it finds, so it is at most sometimes available."""
    return "Fix is sometimes available." if cases else "Fix is not available."


_APPLIED = {
    Applicability.SAFE: "`swacheck audit --fix` applies it",
    Applicability.UNSAFE: (
        "only `swacheck audit --fix --unsafe-fixes` applies it (the editor labels it unsafe); "
        "review the result"
    ),
}


def describe(cases: Sequence[FixCase]) -> str:
    """The generated paragraph of a page's "Fix safety" section."""
    if not cases:
        return "This rule has no autofix."
    if len(cases) == 1 and not cases[0].when:
        case = cases[0]
        return f"The fix is {case.applicability.value}: {_APPLIED[case.applicability]}."
    lines = ["The fix is safe or unsafe depending on the finding (JSON: `fix.applicability`):", ""]
    lines += [
        f"- **{case.applicability.value}** when {case.when}: {_APPLIED[case.applicability]}."
        for case in cases
    ]
    return "\n".join(lines)
