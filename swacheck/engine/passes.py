"""The two passes over the files the prefilter let through, and ``--fix``.

The first pass parses every candidate file and collects its facts into the
:class:`ProjectIndex`; the second runs the rules with that index, so a rule can follow
a helper defined in another file of the same audit. This is the part of an audit that
needs libcst; :mod:`swacheck.engine.audit` imports it only when some file has to be
parsed.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from swacheck.analysis.index import ModuleFacts, ProjectIndex
from swacheck.config import Config
from swacheck.engine.cache import ResultCache, facts_digest, project_digest
from swacheck.engine.checker import CheckOutcome, check_parsed
from swacheck.engine.fixer import apply_fixes, fixable, write_atomic
from swacheck.engine.gc_pause import gc_paused
from swacheck.engine.parse import Parsed, parse_regions, parse_source
from swacheck.engine.selection import ignored_for_path, is_ignored
from swacheck.engine.shards import ShardPool, parse_and_collect
from swacheck.engine.sources import Source, relative_to_root
from swacheck.finding import PARSE_ERROR_CODE, Finding
from swacheck.rule import Rule
from swacheck.triggers import TriggerSet

if TYPE_CHECKING:
    from swacheck.engine.audit import AuditResult

# Below this many files to parse, a process pool costs more than it saves.
PARALLEL_THRESHOLD = 24
# Fix passes per file before giving up on convergence (ruff uses 100).
MAX_FIX_PASSES = 10


@dataclass(frozen=True)
class PassOptions:
    """What the passes need of the audit's options."""

    rules: Sequence[type[Rule]]
    config: Config
    jobs: int
    fix: bool
    unsafe_fixes: bool
    diff: bool


class Passes:
    def __init__(
        self, options: PassOptions, regions: TriggerSet | None, cache: ResultCache | None
    ) -> None:
        self.options = options
        self.config = options.config
        # Triggers of the definitions worth parsing, when every rule is region-safe.
        self.regions = regions
        self.cache = cache
        # Per file, a digest of its first-pass result (kept in the cache beside it).
        self._fact_digests: dict[str, str] = {}
        # Worker processes holding parsed trees between the passes (parallel runs).
        self._shards: ShardPool | None = None

    @property
    def _mode(self) -> str:
        """What the cached facts and findings were computed from."""
        return "regions" if self.regions is not None else "whole"

    def _active_rules(
        self, rules: Sequence[type[Rule]], project: ProjectIndex, result: AuditResult
    ) -> list[type[Rule]]:
        active = []
        for rule in rules:
            reason = rule.inactive_reason(project, self.config)
            if reason is None:
                active.append(rule)
            else:
                result.inactive[rule.code] = reason
        return active

    def _serial(self, count: int) -> bool:
        return self.options.jobs <= 1 or count < PARALLEL_THRESHOLD

    def _first_pass(
        self, sources: Sequence[Source], rules: Sequence[type[Rule]], cache: ResultCache | None
    ) -> list[ModuleFacts | Finding]:
        """Parse and collect facts; serial runs keep the parsed module for the second pass."""
        results: dict[int, ModuleFacts | Finding] = {}
        keys: dict[int, str] = {}
        for i, source in enumerate(sources):
            if cache is not None:
                keys[i] = cache.key("facts", source.data, f"{source.display}\0{self._mode}")
                hit = cache.get(keys[i])
                if isinstance(hit, tuple) and isinstance(hit[0], ModuleFacts | Finding):
                    results[i], self._fact_digests[source.display] = hit
        todo = [i for i in range(len(sources)) if i not in results]
        items = [(sources[i].number, sources[i].display, sources[i].data) for i in todo]
        if self._serial(len(todo)):
            parsed, firsts = parse_and_collect(items, rules, self.config, self.regions)
            by_number = dict(firsts)
            for i in todo:
                sources[i].parsed = parsed.get(sources[i].number)
        else:
            self._shards = ShardPool(self.options.jobs, items, rules, self.config, self.regions)
            by_number = self._shards.first_pass()
        for i in todo:
            results[i] = by_number[sources[i].number]
        if cache is not None:
            for i in todo:
                digest = facts_digest(results[i])
                self._fact_digests[sources[i].display] = digest
                cache.put(keys[i], (results[i], digest))
        return [results[i] for i in range(len(sources))]

    def _second_pass(
        self,
        sources: Sequence[Source],
        rules: Sequence[type[Rule]],
        project: ProjectIndex,
        cache: ResultCache | None,
        digest: str,
    ) -> list[CheckOutcome]:
        outcomes: dict[int, CheckOutcome] = {}
        keys: dict[int, str] = {}
        relative = [relative_to_root(s.path, self.config) for s in sources]
        for i, source in enumerate(sources):
            if cache is not None:
                keys[i] = cache.key(
                    "findings",
                    source.data,
                    f"{source.display}\0{relative[i]}\0{digest}\0{self._mode}",
                )
                hit = cache.get(keys[i])
                if isinstance(hit, list):
                    outcomes[i] = CheckOutcome(findings=hit)
        todo = [i for i in range(len(sources)) if i not in outcomes]
        if self._shards is not None:
            wanted = [(sources[i].number, relative[i]) for i in todo]
            by_number = self._shards.second_pass(wanted, rules, project)
            for i in todo:
                if sources[i].number in by_number:
                    outcomes[i] = by_number[sources[i].number]
        rest = [i for i in todo if i not in outcomes]
        if self._serial(len(rest)) or all(sources[i].parsed is not None for i in rest):
            for i in rest:
                parsed = sources[i].parsed or parse_regions(
                    sources[i].display, sources[i].data, self.regions
                )
                assert isinstance(parsed, Parsed)  # it parsed in the first pass
                sources[i].parsed = parsed
                outcomes[i] = check_parsed(
                    sources[i].display, relative[i], parsed, rules, self.config, project
                )
        else:
            # Facts came from the cache, so no worker holds these files' trees yet.
            items = [(sources[i].number, sources[i].display, sources[i].data) for i in rest]
            pool = ShardPool(self.options.jobs, items, rules, self.config, self.regions)
            try:
                pool.first_pass()
                wanted = [(sources[i].number, relative[i]) for i in rest]
                by_number = pool.second_pass(wanted, rules, project)
            finally:
                pool.close()
            for i in rest:
                outcomes[i] = by_number[sources[i].number]
        if cache is not None:
            for i in todo:
                if not outcomes[i].errors:
                    cache.put(keys[i], outcomes[i].findings)
        return [outcomes[i] for i in range(len(sources))]

    def run(self, sources: list[Source], result: AuditResult) -> None:
        """Audit ``sources`` into ``result`` (findings, files parsed, inactive rules)."""
        try:
            with gc_paused():
                self._audit(sources, self.options.rules, self.cache, result)
        finally:
            if self._shards is not None:
                self._shards.close()

    def _audit(
        self,
        sources: list[Source],
        rules: Sequence[type[Rule]],
        cache: ResultCache | None,
        result: AuditResult,
    ) -> None:
        firsts = self._first_pass(sources, rules, cache)

        facts: list[ModuleFacts] = []
        checkable: list[Source] = []
        for source, first in zip(sources, firsts, strict=True):
            if isinstance(first, Finding):
                relative = relative_to_root(source.path, self.config)
                ignored = is_ignored(PARSE_ERROR_CODE, ignored_for_path(self.config, relative))
                if source.relevant and not ignored:
                    result.findings.append(first)
            else:
                facts.append(first)
                checkable.append(source)
        result.files_parsed = len(sources)
        project = ProjectIndex(facts)
        active = self._active_rules(rules, project, result)
        digest = project_digest(self._fact_digests) if cache is not None else ""
        outcomes = self._second_pass(checkable, active, project, cache, digest)

        for source, outcome in zip(checkable, outcomes, strict=True):
            result.errors.extend(f"{source.display}: internal error: {e}" for e in outcome.errors)
            findings = outcome.findings
            if self.options.fix or self.options.diff:
                findings = self._fix(source, findings, active, project, result)
            result.findings.extend(findings)

    def _fix(
        self,
        source: Source,
        findings: list[Finding],
        rules: Sequence[type[Rule]],
        project: ProjectIndex,
        result: AuditResult,
    ) -> list[Finding]:
        """Fix one file until no fixable finding is left; return the findings that remain.

        Fixes are applied to the whole file: the findings of a blanked-out parse have
        the same positions, and every later pass re-checks the whole file.
        """
        unfixed = findings
        parsed = source.parsed if source.parsed and not source.parsed.partial else None
        parsed = parsed or parse_source(source.display, source.data)
        assert isinstance(parsed, Parsed)
        original = parsed.text
        text = original
        applied_total = 0
        relative = relative_to_root(source.path, self.config)
        for _ in range(MAX_FIX_PASSES):
            todo = fixable(findings, self.options.unsafe_fixes)
            if not todo:
                break
            new_text, applied = apply_fixes(text, (f.fix for f in todo if f.fix))
            reparsed = parse_source(source.display, _encode(new_text, parsed))
            if not isinstance(reparsed, Parsed):
                result.errors.append(
                    f"{source.display}: fix not applied: it would not parse ({reparsed.message})"
                )
                break
            text, parsed = new_text, reparsed
            applied_total += len(applied)
            findings = check_parsed(
                source.display, relative, parsed, rules, self.config, project
            ).findings
        if text == original:
            return findings
        if self.options.diff:
            result.diffs.append(
                "".join(
                    difflib.unified_diff(
                        original.splitlines(keepends=True),
                        text.splitlines(keepends=True),
                        fromfile=f"a/{source.display}",
                        tofile=f"b/{source.display}",
                    )
                )
            )
            result.fixes_applied += applied_total
            return findings
        try:
            write_atomic(source.path, _encode(text, parsed, source.data))
        except OSError as exc:
            result.errors.append(f"{source.display}: cannot write fix: {exc.strerror}")
            return unfixed
        result.fixes_applied += applied_total
        return findings


def _encode(text: str, parsed: Parsed, original: bytes = b"") -> bytes:
    data = text.encode(parsed.wrapper.module.encoding)
    bom = b"\xef\xbb\xbf"
    if original.startswith(bom) and not data.startswith(bom):
        data = bom + data
    return data
