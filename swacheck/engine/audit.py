"""The audit driver: files in, findings (and fixed files) out.

Two passes. The first parses every candidate file (those the prefilter lets through)
and collects its facts into the :class:`ProjectIndex`; the second runs the rules with
that index, so a rule can follow a helper defined in another file of the same audit.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from swacheck.analysis.index import ModuleFacts, ProjectIndex
from swacheck.config import Config
from swacheck.discovery import Discovery
from swacheck.engine.cache import ResultCache, facts_digest, project_digest
from swacheck.engine.checker import CheckOutcome, check_parsed
from swacheck.engine.fixer import apply_fixes, fixable, write_atomic
from swacheck.engine.parse import Parsed, parse_regions, parse_source
from swacheck.engine.prefilter import Prefilter
from swacheck.engine.selection import ignored_for_path, is_ignored
from swacheck.engine.shards import ShardPool, parse_and_collect
from swacheck.finding import PARSE_ERROR_CODE, Finding
from swacheck.rule import Rule
from swacheck.triggers import TriggerSet

# Below this many files to parse, a process pool costs more than it saves.
PARALLEL_THRESHOLD = 24
# Fix passes per file before giving up on convergence (ruff uses 100).
MAX_FIX_PASSES = 10


@dataclass(frozen=True)
class AuditOptions:
    rules: Sequence[type[Rule]]
    config: Config
    prefilter: bool = True
    jobs: int = 1
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False
    cache: bool = False


@dataclass
class AuditResult:
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    files_seen: int = 0
    files_parsed: int = 0
    fixes_applied: int = 0
    diffs: list[str] = field(default_factory=list)
    # Rules that did not apply to this audit (DESIGN.md's scope rules), with the reason.
    inactive: dict[str, str] = field(default_factory=dict)


def _display(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def _relative_to_root(path: Path, config: Config) -> str:
    root = config.root
    if root is not None:
        try:
            return path.resolve().relative_to(root).as_posix()
        except ValueError:
            pass
    return path.as_posix()


@dataclass
class _Source:
    path: Path
    display: str
    data: bytes
    relevant: bool = True
    parsed: Parsed | None = None
    # Position in the audit's list of sources: the file's key in worker processes.
    number: int = 0


class Auditor:
    def __init__(self, options: AuditOptions) -> None:
        self.options = options
        self.config = options.config
        # Triggers of the definitions worth parsing, when every rule is region-safe.
        self.regions: TriggerSet | None = None
        # Per file, a digest of its first-pass result (kept in the cache beside it).
        self._fact_digests: dict[str, str] = {}
        # Worker processes holding parsed trees between the passes (parallel runs).
        self._shards: ShardPool | None = None

    @property
    def _mode(self) -> str:
        """What the cached facts and findings were computed from."""
        return "regions" if self.regions is not None else "whole"

    def _read(self, paths: Sequence[Path], result: AuditResult) -> list[tuple[Path, bytes]]:
        discovery = Discovery(self.config)
        files = []
        for path in discovery.files(paths):
            result.files_seen += 1
            try:
                files.append((path, path.read_bytes()))
            except OSError as exc:
                result.errors.append(f"{_display(path)}: cannot read: {exc.strerror}")
        result.errors.extend(f"{p.path}: {p.reason}" for p in discovery.problems)
        return files

    def _applicable(
        self, files: Sequence[tuple[Path, bytes]], result: AuditResult
    ) -> list[type[Rule]]:
        """The enabled rules whose scope (``Rule.activation``) some audited file opens."""
        applicable = []
        for rule in self.options.rules:
            activation = rule.activation(self.config)
            if activation is not None:
                literals, pattern = activation
                needles = [literal.encode() for literal in literals]
                if not any(
                    any(n in data for n in needles) and pattern.search(data) for _, data in files
                ):
                    names = ", ".join(self.config.invalidate_methods)
                    result.inactive[rule.code] = f"no audited file defines {names}"
                    continue
            applicable.append(rule)
        return applicable

    def _sources(
        self, files: Sequence[tuple[Path, bytes]], rules: Sequence[type[Rule]]
    ) -> list[_Source]:
        # SWA999 is reported only for files a rule could fire in, so that --no-prefilter
        # (which parses everything, e.g. to measure the prefilter) gives the same findings.
        relevant = Prefilter(rules, self.config)
        if self.options.prefilter and rules and all(r.region_safe for r in rules):
            self.regions = relevant.triggers
        sources = []
        for path, data in files:
            is_relevant = relevant.wants(data)
            if is_relevant or not self.options.prefilter:
                sources.append(
                    _Source(path, _display(path), data, relevant=is_relevant, number=len(sources))
                )
        return sources

    def _active_rules(
        self, rules: Sequence[type[Rule]], project: ProjectIndex, result: AuditResult
    ) -> list[type[Rule]]:
        active = []
        for rule in rules:
            if rule.is_active(project):
                active.append(rule)
            else:
                names = ", ".join(self.config.invalidate_methods)
                result.inactive[rule.code] = f"no audited file defines {names}"
        return active

    def _cache(self, rules: Sequence[type[Rule]]) -> ResultCache | None:
        if not self.options.cache:
            return None
        folder = Path(self.config.cache_dir)
        if not folder.is_absolute() and self.config.root is not None:
            folder = self.config.root / folder
        return ResultCache(folder, self.config, rules)

    def _serial(self, count: int) -> bool:
        return self.options.jobs <= 1 or count < PARALLEL_THRESHOLD

    def _first_pass(
        self, sources: Sequence[_Source], rules: Sequence[type[Rule]], cache: ResultCache | None
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
        sources: Sequence[_Source],
        rules: Sequence[type[Rule]],
        project: ProjectIndex,
        cache: ResultCache | None,
        digest: str,
    ) -> list[CheckOutcome]:
        outcomes: dict[int, CheckOutcome] = {}
        keys: dict[int, str] = {}
        relative = [_relative_to_root(s.path, self.config) for s in sources]
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

    def run(self, paths: Sequence[Path]) -> AuditResult:
        result = AuditResult()
        files = self._read(paths, result)
        rules = self._applicable(files, result)
        sources = self._sources(files, rules)
        del files
        cache = self._cache(rules)
        try:
            return self._audit(sources, rules, cache, result)
        finally:
            if self._shards is not None:
                self._shards.close()

    def _audit(
        self,
        sources: list[_Source],
        rules: Sequence[type[Rule]],
        cache: ResultCache | None,
        result: AuditResult,
    ) -> AuditResult:
        firsts = self._first_pass(sources, rules, cache)

        facts: list[ModuleFacts] = []
        checkable: list[_Source] = []
        for source, first in zip(sources, firsts, strict=True):
            if isinstance(first, Finding):
                relative = _relative_to_root(source.path, self.config)
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
        result.findings.sort(key=lambda f: f.sort_key)
        return result

    def _fix(
        self,
        source: _Source,
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
        relative = _relative_to_root(source.path, self.config)
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


def audit_paths(paths: Iterable[Path], options: AuditOptions) -> AuditResult:
    return Auditor(options).run(list(paths))


def audit_sources(
    sources: Mapping[str, str], options: AuditOptions, root: Path | None = None
) -> AuditResult:
    """Audit in-memory files (``{relative path: text}``) by writing them under ``root``.

    Used by the rule-example tests so examples run through the very same engine.
    """
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(root or tmp)
        for name, text in sources.items():
            target = base / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        cwd = os.getcwd()
        os.chdir(base)
        try:
            return audit_paths([Path(name) for name in sources], options)
        finally:
            os.chdir(cwd)
