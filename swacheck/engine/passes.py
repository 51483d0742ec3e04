"""The libcst part of an audit: parse, the first pass (facts), the second (rules), fixes.

The first pass parses every candidate file of the project and collects its facts; the
second runs the rules over the files findings are asked for, with the
:class:`ProjectIndex` built from every file's facts, so a rule can follow a helper
defined in another file. What comes from the cache, and which files are asked about,
is the driver's business (:mod:`swacheck.engine.workspace`), which imports this module
only when some file has to be parsed or checked.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field

from swacheck.analysis.cfg import forget_cfgs
from swacheck.analysis.index import ModuleFacts, ProjectIndex
from swacheck.analysis.skeletons import forget_analyses
from swacheck.config import Config
from swacheck.engine.checker import CheckOutcome, check_parsed
from swacheck.engine.fixer import apply_fixes, fixable
from swacheck.engine.parse import Parsed, parse_regions, parse_source
from swacheck.engine.shards import ShardPool, parse_and_collect
from swacheck.engine.sources import Source
from swacheck.finding import Finding
from swacheck.rule import Rule
from swacheck.triggers import TriggerSet

# Below this many files to parse, a process pool costs more than it saves.
PARALLEL_THRESHOLD = 24
# Fix passes per file before giving up on convergence (ruff uses 100).
MAX_FIX_PASSES = 10


@dataclass(frozen=True)
class PassOptions:
    # The rules whose facts the first pass collects (those that apply to the project).
    rules: Sequence[type[Rule]]
    config: Config
    jobs: int
    # Triggers of the definitions worth parsing, when every rule is region-safe.
    regions: TriggerSet | None


@dataclass
class FixOutcome:
    """One file after ``--fix``: its new bytes (``None``: unchanged) and what is left."""

    data: bytes | None
    findings: list[Finding]
    fixed: list[Finding] = field(default_factory=list)
    diff: str = ""
    error: str = ""


class Passes:
    def __init__(self, options: PassOptions) -> None:
        self.options = options
        self.config = options.config
        # Trees kept from the first pass for the second (serial runs, files asked about).
        self._trees: dict[int, Parsed] = {}
        # Worker processes holding parsed trees between the passes (parallel runs).
        self._pool: ShardPool | None = None

    def _serial(self, count: int) -> bool:
        return self.options.jobs <= 1 or count < PARALLEL_THRESHOLD

    def _items(self, sources: Sequence[Source]) -> list[tuple[int, str, bytes]]:
        return [(s.number, s.key, s.data) for s in sources]

    def collect(self, sources: Sequence[Source]) -> dict[int, ModuleFacts | Finding]:
        """Parse ``sources`` and collect their facts (by ``Source.number``); keep the trees
        of those whose findings are asked for (``Source.report``)."""
        rules, regions = self.options.rules, self.options.regions
        if self._serial(len(sources)):
            parsed, firsts = parse_and_collect(self._items(sources), rules, self.config, regions)
            for source in sources:
                if source.report and source.number in parsed:
                    self._trees[source.number] = parsed[source.number]
            return dict(firsts)
        self._pool = ShardPool(self.options.jobs, self._items(sources), rules, self.config, regions)
        return self._pool.first_pass()

    def check(
        self,
        sources: Sequence[Source],
        rules: Sequence[type[Rule]],
        project: ProjectIndex,
        known_codes: frozenset[str] | None,
    ) -> dict[int, CheckOutcome]:
        """Run ``rules`` over ``sources`` (files that parsed): outcomes by number.

        ``known_codes``: see :func:`swacheck.engine.checker.check_parsed`."""
        outcomes: dict[int, CheckOutcome] = {}
        if self._pool is not None:
            wanted = [(s.number, s.relative) for s in sources if s.number not in self._trees]
            outcomes.update(self._pool.second_pass((wanted, rules, project, known_codes)))
        rest = [s for s in sources if s.number not in outcomes]
        untreed = [s for s in rest if s.number not in self._trees]
        if not self._serial(len(untreed)):
            # Facts came from the cache, so no worker holds these files' trees yet.
            pool = ShardPool(
                self.options.jobs,
                self._items(untreed),
                self.options.rules,
                self.config,
                self.options.regions,
            )
            try:
                pool.first_pass()
                wanted = [(s.number, s.relative) for s in untreed]
                outcomes.update(pool.second_pass((wanted, rules, project, known_codes)))
            finally:
                pool.close()
            rest = [s for s in rest if s.number not in outcomes]
        for source in rest:
            tree = self._tree(source)
            outcomes[source.number] = check_parsed(
                source.key, source.relative, tree, rules, self.config, project, known_codes
            )
        return outcomes

    def _tree(self, source: Source) -> Parsed:
        tree = self._trees.get(source.number)
        if tree is None:
            parsed = parse_regions(
                source.key, source.data, self.options.regions, self.config.max_file_size
            )
            assert isinstance(parsed, Parsed)  # it parsed in the first pass
            tree = self._trees[source.number] = parsed
        return tree

    def fix(
        self,
        source: Source,
        findings: list[Finding],
        rules: Sequence[type[Rule]],
        project: ProjectIndex,
        known_codes: frozenset[str] | None,
        *,
        unsafe: bool,
        diff: bool,
    ) -> FixOutcome:
        """Fix one file until no fixable finding is left (nothing is written here).

        Fixes are applied to the whole file: the findings of a blanked-out parse have
        the same positions, and every later pass re-checks the whole file.
        """
        tree = self._trees.get(source.number)
        parsed = tree if tree is not None and not tree.partial else None
        parsed = parsed or parse_source(source.key, source.data)
        assert isinstance(parsed, Parsed)
        original = text = parsed.text
        fixed: list[Finding] = []
        error = ""
        for _ in range(MAX_FIX_PASSES):
            todo = fixable(findings, unsafe)
            if not todo:
                break
            new_text, applied = apply_fixes(text, (f.fix for f in todo if f.fix))
            reparsed = parse_source(source.key, _encode(new_text, parsed))
            if not isinstance(reparsed, Parsed):
                error = f"fix not applied: it would not parse ({reparsed.message})"
                break
            text, parsed = new_text, reparsed
            chosen = {id(fix) for fix in applied}
            fixed.extend(f for f in todo if id(f.fix) in chosen)
            findings = check_parsed(
                source.key, source.relative, parsed, rules, self.config, project, known_codes
            ).findings
        if text == original:
            return FixOutcome(None, findings, error=error)
        shown = diff_of(original, text, source.display) if diff else ""
        data = _encode(text, parsed, source.data)
        return FixOutcome(data, findings, fixed, shown, error)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self._trees.clear()
        # The memos sharing a function's CFG and analysis between the passes hold this
        # audit's trees: a long-lived caller (a language server) would keep every one.
        forget_cfgs()
        forget_analyses()


def diff_of(original: str, text: str, name: str) -> str:
    return "".join(
        difflib.unified_diff(
            original.splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
        )
    )


def _encode(text: str, parsed: Parsed, original: bytes = b"") -> bytes:
    data = text.encode(parsed.wrapper.module.encoding)
    bom = b"\xef\xbb\xbf"
    if original.startswith(bom) and not data.startswith(bom):
        data = bom + data
    return data
