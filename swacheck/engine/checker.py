"""One file through the rules: first-pass facts, then the batched check."""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field

from swacheck.analysis.index import ModuleFacts, ProjectIndex, index_module
from swacheck.analysis.names import Names
from swacheck.analysis.walk import memoized_children, walk
from swacheck.config import Config
from swacheck.context import FileContext
from swacheck.engine.noqa import suppressions
from swacheck.engine.parse import Parsed, nesting_finding
from swacheck.engine.selection import ignored_for_path, is_ignored
from swacheck.finding import Finding
from swacheck.rule import Rule


@dataclass
class CheckOutcome:
    findings: list[Finding] = field(default_factory=list)
    # Rules that raised: "<code>: <exception>" (an internal error, not a crash of the run).
    errors: list[str] = field(default_factory=list)


def _context(path: str, parsed: Parsed, config: Config, project: ProjectIndex) -> FileContext:
    return FileContext(path, parsed.text, parsed.wrapper, config, Names(config), project)


def collect_facts(
    path: str, parsed: Parsed, rules: Sequence[type[Rule]], config: Config
) -> ModuleFacts | Finding:
    """The file's first-pass facts; SWA999 if it is nested too deeply to analyse."""
    context = _context(path, parsed, config, ProjectIndex())
    summaries = any(rule.needs_skeletons(context) for rule in rules)
    try:
        with memoized_children():
            positions = context.positions if summaries else None
            facts = index_module(context.module, path, positions=positions)
            for rule in rules:
                collected = rule.collect_facts(context)
                if collected is not None:
                    facts.rule_facts[rule.code] = collected
    except RecursionError:
        # libcst's code generation recurses per operand (a 1,500-term sum): this file is
        # beyond analysis, the audit of every other file goes on.
        return nesting_finding(path)
    return facts


def _describe(rule: type[Rule], exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {frame.filename}:{frame.lineno}" if frame else ""
    return f"{rule.code} raised {type(exc).__name__}: {exc}{where}"


def check_parsed(
    path: str,
    relative: str,
    parsed: Parsed,
    rules: Sequence[type[Rule]],
    config: Config,
    project: ProjectIndex,
) -> CheckOutcome:
    """Run ``rules`` over one parsed file; a rule that raises is isolated and reported."""
    outcome = CheckOutcome()
    ignored = ignored_for_path(config, relative)
    active = [r for r in rules if not is_ignored(r.code, ignored)]
    if not active:
        return outcome
    context = _context(path, parsed, config, project)
    with memoized_children():
        visitors = [rule(context) for rule in active]
        try:
            walk(parsed.wrapper.module, visitors)
        except (Exception, RecursionError):
            # Find the culprit(s) and keep every other rule's findings.
            visitors = []
            for rule in active:
                single = rule(context)
                try:
                    walk(parsed.wrapper.module, [single])
                except (Exception, RecursionError) as exc:
                    outcome.errors.append(_describe(rule, exc))
                    continue
                visitors.append(single)
    noqa = suppressions(parsed.text)
    for visitor in visitors:
        for finding in visitor.findings:
            suppression = noqa.get(finding.noqa_row or finding.start.row)
            if suppression is None or not suppression.covers(finding.code):
                outcome.findings.append(finding)
    return outcome
