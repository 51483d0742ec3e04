"""The audit driver: files in, findings (and fixed files) out.

Cheap stages first, each of which can end the audit without parsing anything:

1. read every discovered file;
2. the *run cache*: the findings of an earlier audit of exactly these files (paths and
   bytes) under this configuration, rule set and swacheck;
3. the scope check on raw bytes (``RuleSpec.activation``) and the prefilter
   (``RuleSpec.triggers``): a file matching no enabled rule's triggers is not parsed.

Only then, for the files left, the two passes (:mod:`swacheck.engine.passes`), which
import libcst. A warm audit, or a pre-commit call on files no rule can fire in, reads
the rule catalogue from the cache and never imports libcst or the rules.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from swacheck.catalogue import RuleSpec, spec_of
from swacheck.config import Config
from swacheck.discovery import Discovery
from swacheck.engine.cache import ResultCache
from swacheck.engine.fixer import fixable
from swacheck.engine.prefilter import Prefilter
from swacheck.engine.sources import Source, display_path
from swacheck.finding import Finding

if TYPE_CHECKING:
    from swacheck.rule import Rule
    from swacheck.triggers import TriggerSet


@dataclass(frozen=True)
class AuditOptions:
    # Specs from the catalogue (the CLI) or rule classes (tests, the API).
    rules: Sequence[RuleSpec | type[Rule]]
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


@dataclass(frozen=True)
class _RunRecord:
    """What the run cache keeps of an audit: everything of its result that files decide."""

    findings: tuple[Finding, ...]
    files_parsed: int
    inactive: tuple[tuple[str, str], ...]


def result_cache(config: Config) -> ResultCache:
    """The configuration's cache folder (``cache-dir``, relative to the config's root)."""
    folder = Path(config.cache_dir)
    if not folder.is_absolute() and config.root is not None:
        folder = config.root / folder
    return ResultCache(folder, config)


class Auditor:
    def __init__(self, options: AuditOptions) -> None:
        self.options = options
        self.config = options.config
        self.specs = [spec_of(rule, self.config) for rule in options.rules]

    def run(self, paths: Sequence[Path]) -> AuditResult:
        result = AuditResult()
        files = self._read(paths, result)
        cache = self._cache()
        run_key = cache.key("run", b"", self._run_text(paths, files)) if cache is not None else ""
        if cache is not None and self._replay(cache.get(run_key), result):
            return result
        specs = self._applicable(files, result)
        sources, regions = self._sources(files, specs)
        del files
        if sources:
            from swacheck.engine.passes import Passes, PassOptions

            options = PassOptions(
                rules=[spec.load() for spec in specs],
                config=self.config,
                jobs=self.options.jobs,
                fix=self.options.fix,
                unsafe_fixes=self.options.unsafe_fixes,
                diff=self.options.diff,
            )
            Passes(options, regions, cache).run(sources, result)
        result.findings.sort(key=lambda f: f.sort_key)
        if cache is not None and not result.errors and not (self.options.fix or self.options.diff):
            inactive = tuple(sorted(result.inactive.items()))
            cache.put(run_key, _RunRecord(tuple(result.findings), result.files_parsed, inactive))
        return result

    def _read(self, paths: Sequence[Path], result: AuditResult) -> list[tuple[Path, bytes]]:
        discovery = Discovery(self.config)
        files = []
        for path in discovery.files(paths):
            result.files_seen += 1
            try:
                files.append((path, path.read_bytes()))
            except OSError as exc:
                result.errors.append(f"{display_path(path)}: cannot read: {exc.strerror}")
        result.errors.extend(f"{p.path}: {p.reason}" for p in discovery.problems)
        return files

    def _cache(self) -> ResultCache | None:
        if not self.options.cache:
            return None
        return result_cache(self.config).for_rules([spec.code for spec in self.specs])

    def _run_text(self, paths: Sequence[Path], files: Sequence[tuple[Path, bytes]]) -> str:
        """What a run's findings are a function of, beyond the cache's salt: each file's
        bytes and path, and what its shown and root-relative paths are computed from
        (the working directory, and where the given paths lead)."""
        lines = [
            f"prefilter={self.options.prefilter}",
            f"cwd={os.getcwd()}",
            *(f"given={os.path.realpath(path)}" for path in paths),
        ]
        lines.extend(f"{path}\0{hashlib.sha256(data).hexdigest()}" for path, data in files)
        return "\n".join(lines)

    def _replay(self, record: object, result: AuditResult) -> bool:
        """Fill ``result`` from a run-cache hit, unless it holds a fix to make."""
        if not isinstance(record, _RunRecord):
            return False
        if (self.options.fix or self.options.diff) and fixable(
            record.findings, self.options.unsafe_fixes
        ):
            return False
        result.findings.extend(record.findings)
        result.files_parsed = record.files_parsed
        result.inactive.update(record.inactive)
        return True

    def _applicable(
        self, files: Sequence[tuple[Path, bytes]], result: AuditResult
    ) -> list[RuleSpec]:
        """The enabled rules whose scope (``Rule.activation``) some audited file opens."""
        applicable = []
        for spec in self.specs:
            if spec.activation is not None:
                literals, pattern = spec.activation
                needles = [literal.encode() for literal in literals]
                if not any(
                    any(n in data for n in needles) and pattern.search(data) for _, data in files
                ):
                    names = ", ".join(self.config.invalidate_methods)
                    result.inactive[spec.code] = f"no audited file defines {names}"
                    continue
            applicable.append(spec)
        return applicable

    def _sources(
        self, files: Sequence[tuple[Path, bytes]], specs: Sequence[RuleSpec]
    ) -> tuple[list[Source], TriggerSet | None]:
        """The files to parse, and the triggers of the definitions worth parsing in them
        (``swacheck.engine.regions``) when every rule is region-safe."""
        # SWA999 is reported only for files a rule could fire in, so that --no-prefilter
        # (which parses everything, e.g. to measure the prefilter) gives the same findings.
        relevant = Prefilter(specs)
        regions = None
        if self.options.prefilter and specs and all(s.region_safe for s in specs):
            regions = relevant.triggers
        sources = []
        for path, data in files:
            is_relevant = relevant.wants(data)
            if is_relevant or not self.options.prefilter:
                sources.append(
                    Source(
                        path, display_path(path), data, relevant=is_relevant, number=len(sources)
                    )
                )
        return sources, regions


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
