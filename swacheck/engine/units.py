"""What the engine does with one file, wherever that runs: the first pass (parse, then the
file's facts), the check (the rules over its tree) and the fix.

These are the units the worker processes run (``engine/workers.py``), one file at a
time, each inside the per-file bounds; whatever one file does to them, every exception
it raises becomes that file's answer here (an ``SWA999``, or a fix refused), and a crash
or a bound the operating system enforces costs the worker, which the parent replaces.
What a unit does inside (which text libcst parses, where facts come from) is the
analysis' business; how and where units run is the workers'. A unit returns plain data
(facts, findings, bytes), never a libcst tree: trees stay in the process that parsed
them, for the check and the fix of the same file.
"""

from __future__ import annotations

import difflib
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from swacheck.analysis.index import ModuleFacts, ProjectIndex
from swacheck.config import Config
from swacheck.engine.checker import check_parsed, collect_facts
from swacheck.engine.decoding import LOSSY
from swacheck.engine.fixer import apply_fixes, fixable
from swacheck.engine.limits import (
    OutOfTime,
    beyond_limits,
    out_of_memory,
    out_of_time,
    time_limit,
)
from swacheck.engine.parse import Parsed, parse_regions, parse_source
from swacheck.engine.regions import Regions
from swacheck.engine.result import CheckOutcome
from swacheck.finding import Finding
from swacheck.rule import Rule

# Fix passes per file before giving up on convergence (ruff uses 100).
MAX_FIX_PASSES = 10
# Trees kept for the check beyond this many (a whole-tree audit's) drop their walk
# layouts after the first pass, each as large as its tree's node list; the few of a
# pre-commit call or an editor's edit keep theirs for the check's walks.
KEPT_LAYOUTS = 8

# What a unit is doing, for the reason of a crash: libcst's native parser, or the rest.
PARSING, ANALYSING = "parsing", "analysing"
Phase = Callable[[str], None]


def _no_phase(phase: str) -> None:
    pass


@dataclass
class FixOutcome:
    """One file after ``--fix``: its new bytes (``None``: unchanged) and what is left."""

    data: bytes | None
    findings: list[Finding]
    fixed: list[Finding] = field(default_factory=list)
    diff: str = ""
    error: str = ""


def _failure(exc: BaseException) -> str:
    """An unexpected exception, named with where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}{': ' + text[0][:200] if text else ''}{where}"


def cannot_analyse(path: str, exc: BaseException) -> Finding:
    """``SWA999`` for a file whose analysis raised what nothing else caught."""
    return beyond_limits(path, f"File could not be analysed ({_failure(exc)})")


def parse(
    path: str, data: bytes, regions: Regions | None, config: Config, phase: Phase = _no_phase
) -> Parsed | Finding:
    """The tree the passes work on (definitions no trigger matches blanked out where
    ``regions``), or the ``SWA999`` saying why there is none."""
    phase(PARSING)
    return parse_regions(path, data, regions, config.max_file_size)


def first_pass(
    path: str,
    data: bytes,
    rules: Sequence[type[Rule]],
    config: Config,
    regions: Regions | None,
    phase: Phase = _no_phase,
) -> tuple[Parsed | None, ModuleFacts | Finding]:
    """Parse one file and collect its facts, within ``max-file-time``: the tree (to keep
    for the check; ``None`` when there are no facts) and the facts or the ``SWA999``."""
    try:
        with time_limit(config.max_file_time):
            tree = parse(path, data, regions, config, phase)
            if not isinstance(tree, Parsed):
                return None, tree
            phase(ANALYSING)
            facts = collect_facts(path, tree, rules, config, data)
    except OutOfTime:
        return None, out_of_time(path, config.max_file_time)
    except MemoryError:
        return None, out_of_memory(path, config.max_file_memory)
    except Exception as exc:
        return None, cannot_analyse(path, exc)
    return (tree if isinstance(facts, ModuleFacts) else None), facts


def keep_for_check(trees: dict[int, Parsed], number: int, tree: Parsed) -> None:
    """Keep ``tree`` (file ``number``'s) in ``trees`` until its check, with its walk
    layout while at most :data:`KEPT_LAYOUTS` trees are kept."""
    trees[number] = tree
    if len(trees) > KEPT_LAYOUTS:
        tree.maps.layout.drop()


def check(
    path: str,
    relative: str,
    tree: Parsed | bytes,
    rules: Sequence[type[Rule]],
    config: Config,
    project: ProjectIndex,
    known_codes: frozenset[str] | None,
    regions: Regions | None,
    phase: Phase = _no_phase,
) -> CheckOutcome:
    """Run ``rules`` over one file (its tree, or its bytes to parse again), within
    ``max-file-time``; a rule that raises is isolated (``check_parsed``), anything else
    that raises is the file's ``SWA999``."""
    try:
        if isinstance(tree, bytes):
            with time_limit(config.max_file_time):
                parsed = parse(path, tree, regions, config, phase)
            if not isinstance(parsed, Parsed):
                return CheckOutcome([parsed])
            tree = parsed
        phase(ANALYSING)
        return check_parsed(path, relative, tree, rules, config, project, known_codes)
    except OutOfTime:
        return CheckOutcome([out_of_time(path, config.max_file_time)])
    except MemoryError:
        return CheckOutcome([out_of_memory(path, config.max_file_memory)])
    except Exception as exc:
        return CheckOutcome([cannot_analyse(path, exc)])


def fix(
    path: str,
    relative: str,
    data: bytes,
    display: str,
    findings: list[Finding],
    rules: Sequence[type[Rule]],
    config: Config,
    project: ProjectIndex,
    known_codes: frozenset[str] | None,
    *,
    unsafe: bool,
    diff: bool,
    tree: Parsed | None = None,
    phase: Phase = _no_phase,
) -> FixOutcome:
    """Fix one file until no fixable finding is left (nothing is written here).

    Fixes are applied to the whole file: the findings of a blanked-out parse have the
    same positions, and every later pass re-checks the whole file (``tree``: the first
    pass's, when it is of the whole file). Anything that goes wrong leaves the file as
    it is, with its findings, and says why.
    """
    try:
        return _fix(
            path,
            relative,
            data,
            display,
            findings,
            rules,
            config,
            project,
            known_codes,
            unsafe=unsafe,
            diff=diff,
            tree=tree,
            phase=phase,
        )
    except OutOfTime:
        reason = f"over {config.max_file_time:g} s of CPU time: `max-file-time`"
    except MemoryError:
        reason = f"over the memory limit of {config.max_file_memory:,} MiB: `max-file-memory`"
    except Exception as exc:
        reason = _failure(exc)
    return FixOutcome(None, findings, error=f"fix not applied ({reason})")


def _fix(
    path: str,
    relative: str,
    data: bytes,
    display: str,
    findings: list[Finding],
    rules: Sequence[type[Rule]],
    config: Config,
    project: ProjectIndex,
    known_codes: frozenset[str] | None,
    *,
    unsafe: bool,
    diff: bool,
    tree: Parsed | None,
    phase: Phase,
) -> FixOutcome:
    parsed: Parsed | Finding | None = tree if tree is not None and not tree.partial else None
    if parsed is None:
        phase(PARSING)
        with time_limit(config.max_file_time):
            parsed = parse_source(path, data)
    if not isinstance(parsed, Parsed):
        return FixOutcome(None, findings, error=f"fix not applied ({parsed.message})")
    if parsed.decoded.lossy:
        return FixOutcome(None, findings, error=f"fix not applied ({LOSSY})")
    original = text = parsed.text
    fixed: list[Finding] = []
    error = ""
    for _ in range(MAX_FIX_PASSES):
        todo = fixable(findings, unsafe)
        if not todo:
            break
        new_text, applied = apply_fixes(text, (f.fix for f in todo if f.fix))
        phase(PARSING)
        with time_limit(config.max_file_time):
            reparsed = parse_source(path, parsed.decoded.encode(new_text))
        if not isinstance(reparsed, Parsed):
            error = f"fix not applied: it would not parse ({reparsed.message})"
            break
        text, parsed = new_text, reparsed
        chosen = {id(fix) for fix in applied}
        fixed.extend(f for f in todo if id(f.fix) in chosen)
        phase(ANALYSING)
        findings = check_parsed(
            path, relative, parsed, rules, config, project, known_codes, fresh=True
        ).findings
    if text == original:
        return FixOutcome(None, findings, error=error)
    shown = diff_of(original, text, display) if diff else ""
    return FixOutcome(parsed.decoded.encode(text), findings, fixed, shown, error)


def diff_of(original: str, text: str, name: str) -> str:
    return "".join(
        difflib.unified_diff(
            original.splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
        )
    )
