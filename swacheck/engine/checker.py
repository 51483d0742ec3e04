"""One file through the rules: first-pass facts, then the batched check.

A rule runs on a file only where the file holds one of its triggers (``Rule.triggers``):
the prefilter's argument, applied per rule. Without them it can neither fire nor need
facts there, so skipping it changes nothing but the time an audit takes: a candidate
file holding SWA010's graph words is not walked by SWA009 for SWA names it lacks.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from swacheck.analysis.index import ModuleFacts, ProjectIndex, index_module
from swacheck.analysis.names import Names
from swacheck.analysis.walk import memoized_children, walk
from swacheck.config import Config
from swacheck.context import FileContext
from swacheck.engine.limits import OutOfTime, out_of_time, time_limit
from swacheck.engine.noqa import noqa_rows, unused
from swacheck.engine.parse import Parsed, nesting_finding
from swacheck.engine.result import CheckOutcome
from swacheck.engine.selection import ignored_for_path, is_fixable, is_ignored
from swacheck.finding import UNUSED_NOQA_CODE, Finding
from swacheck.rule import Rule
from swacheck.triggers import FileText, compiled

if TYPE_CHECKING:
    from swacheck.semantics.unit import FileUnit


def _context(path: str, parsed: Parsed, config: Config, project: ProjectIndex) -> FileContext:
    return FileContext(
        path, parsed.text, parsed.wrapper, config, Names(config), project, maps=parsed.maps
    )


def _applies(rules: Sequence[type[Rule]], parsed: Parsed, config: Config) -> list[type[Rule]]:
    """The ``rules`` whose triggers ``parsed``'s file holds (those without: all)."""
    text = FileText(parsed.text.encode())
    found = []
    for rule in rules:
        triggers = rule.triggers(config)
        if triggers is None or compiled(triggers).matches(text):
            found.append(rule)
    return found


def collect_facts(
    path: str, parsed: Parsed, rules: Sequence[type[Rule]], config: Config, data: bytes = b""
) -> ModuleFacts | Finding:
    """The file's first-pass facts; SWA999 if it is nested too deeply to analyse."""
    context = _context(path, parsed, config, ProjectIndex())
    summaries = any(rule.needs_skeletons(context) for rule in rules)
    rules = _applies(rules, parsed, config)
    semantic = None
    if any(rule.queries() for rule in rules):
        from swacheck.semantics.model import engine_of, model_for
        from swacheck.semantics.unit import file_facts

        try:
            model = model_for(config, engine_of(path))
            semantic = file_facts(path, data or parsed.text.encode("utf-8"), model)
        except (SyntaxError, ValueError):
            semantic = None  # CPython does not read it (a Python 2 file libcst does read)
    try:
        with memoized_children(context.module, parsed.maps.layout):
            positions = context.positions if summaries else None
            facts = index_module(context.module, path, positions=positions)
            facts.semantic = semantic
            for rule in rules:
                if rule.semantic:
                    continue
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
    known_codes: frozenset[str] | None = None,
    fresh: bool = False,
) -> CheckOutcome:
    """Run ``rules`` over one parsed file; a rule that raises is isolated and reported.

    ``known_codes``: every code swacheck has, when unused ``# noqa`` directives are to be
    reported (``SWA100``); ``None`` when they are not. ``fresh``: the text is not the one
    the first pass read (a fix's), so the semantic rules read it anew. The walk is bounded by
    ``max-file-time``; a file past it gets an SWA999 instead of its findings.
    """
    outcome = CheckOutcome()
    ignored = ignored_for_path(config, relative)
    active = [r for r in rules if not is_ignored(r.code, ignored)]
    report_unused = known_codes is not None and not is_ignored(UNUSED_NOQA_CODE, ignored)
    if not active and not report_unused:
        return outcome
    applying = _applies(active, parsed, config)
    # A rule the file holds no trigger of runs in effect: it can find nothing here.
    idle = [rule.code for rule in active if rule not in applying]
    active = applying
    try:
        with time_limit(config.max_file_time):
            visitors = _run(path, parsed, active, config, project, outcome, fresh)
    except OutOfTime:
        return CheckOutcome([out_of_time(path, config.max_file_time)])
    noqa = parsed.noqa
    # ``--ignore-noqa``: suppressions are still read (SWA100 says which are unused), as
    # ruff does, but every finding is reported.
    shown = config.ignore_noqa
    used: list[tuple[int, str]] = []
    joined = noqa_rows(parsed.text) if any(v.findings for v in visitors) else {}
    for visitor in visitors:
        for finding in visitor.findings:
            row = finding.noqa_row or finding.start.row
            if row in joined:  # where ruff puts its noqa: the last of the joined rows
                row = joined[row]
                finding = replace(finding, noqa_row=row)
            line = noqa.lines.get(row)
            suppressed = line is not None and line.covers(finding.code)
            if suppressed:
                used.append((row, finding.code))
            if shown or not (suppressed or noqa.file_covers(finding.code)):
                outcome.findings.append(finding)
    if report_unused and known_codes is not None:
        ran = [visitor.code for visitor in visitors] + idle
        found = unused(path, noqa, ran, used, known_codes)
        outcome.findings.extend(f for f in found if shown or not noqa.file_covers(f.code))
    outcome.findings = [_offered(finding, config) for finding in outcome.findings]
    return outcome


def _offered(finding: Finding, config: Config) -> Finding:
    """``finding`` without its fix where its code is not fixable (``unfixable``), as ruff
    drops it: not applied, not counted, not shown in any format."""
    if finding.fix is None or is_fixable(finding.code, config):
        return finding
    return replace(finding, fix=None)


def _run(
    path: str,
    parsed: Parsed,
    active: Sequence[type[Rule]],
    config: Config,
    project: ProjectIndex,
    outcome: CheckOutcome,
    fresh: bool = False,
) -> list[Rule]:
    """The rules' visitors after one walk over the file; a rule that raises is left out
    and its error recorded in ``outcome``."""
    queries = [rule for rule in active if rule.semantic]
    active = [rule for rule in active if not rule.semantic]
    units: list[FileUnit | None] = []

    def unit() -> FileUnit | None:
        if not units:
            units.append(_unit(path, parsed, config, project, fresh))
        return units[0]

    found = _queries(unit, queries, outcome) if queries else []
    context = _context(path, parsed, config, project)
    # The first pass's layout where the tree kept it (``units.keep_for_check``); one laid
    # out here lasts only for this walk (the tree may stay, for a fix, with many others).
    layout = parsed.maps.layout
    with memoized_children(parsed.wrapper.module, layout if layout.built else None):
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
    # a visitor rule's queries (the part of its idea on the semantic core)
    for visitor in visitors:
        if type(visitor).queries() and unit() is not None:
            try:
                visitor.check(unit())  # type: ignore[arg-type]
            except (Exception, RecursionError) as exc:
                outcome.errors.append(_describe(type(visitor), exc))
    return found + visitors


def _unit(
    path: str, parsed: Parsed, config: Config, project: ProjectIndex, fresh: bool
) -> FileUnit | None:
    """One file's view of the project's semantic analysis (``fresh``: its text is not
    what the first pass saw, a fix's: its facts are made anew, in the project)."""
    from swacheck.semantics.unit import Analysis, FileUnit, file_facts

    facts = project.modules.get(path)
    module = facts.semantic if facts is not None else None
    analysis = project.semantic(config)
    if module is None or fresh:
        try:
            module = file_facts(path, parsed.text.encode("utf-8", "surrogatepass"), analysis.model)
        except (SyntaxError, ValueError):
            return None
        others = [m.semantic for p, m in project.modules.items() if p != path and m.semantic]
        analysis = Analysis([*others, module], config)
    return FileUnit(path, module, analysis, None if parsed.partial else parsed.text)


def _queries(
    unit: Callable[[], FileUnit | None], rules: Sequence[type[Rule]], outcome: CheckOutcome
) -> list[Rule]:
    """The semantic rules' checks of one file; a rule that raises is left out and its
    error recorded in ``outcome``."""
    found = unit()
    if found is None:
        return []
    done = []
    for rule in rules:
        query = rule(found)
        try:
            query.check(found)
        except (Exception, RecursionError) as exc:
            outcome.errors.append(_describe(rule, exc))
            continue
        done.append(query)
    return done
