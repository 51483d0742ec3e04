"""The libcst part of an audit: parse, the first pass (facts), the second (rules), fixes.

The first pass parses every candidate file of the project and collects its facts; the
second runs the rules over the files findings are asked for, with the
:class:`ProjectIndex` built from every file's facts, so a rule can follow a helper
defined in another file. What comes from the cache, and which files are asked about,
is the driver's business (:mod:`swacheck.engine.workspace`), which imports this module
only when some file has to be parsed or checked. Each file's unit of work
(:mod:`swacheck.engine.units`) runs in a worker process (:mod:`swacheck.engine.workers`),
where a file that crashes the parser or exceeds a bound costs that file only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from swacheck.analysis.index import ModuleFacts, ProjectIndex
from swacheck.config import Config
from swacheck.engine.regions import Regions
from swacheck.engine.result import CheckOutcome
from swacheck.engine.sources import Source
from swacheck.engine.units import FixOutcome, diff_of
from swacheck.engine.workers import Advance, Executor, Workers, no_progress
from swacheck.finding import Finding
from swacheck.rule import Rule

__all__ = ["FixOutcome", "PassOptions", "Passes", "diff_of"]


@dataclass(frozen=True)
class PassOptions:
    # The rules whose facts the first pass collects (those that apply to the project).
    rules: Sequence[type[Rule]]
    config: Config
    # Where the units run (the workspace's worker processes).
    workers: Workers
    # Triggers of the definitions worth parsing, when every rule is region-safe.
    regions: Regions | None


class Passes:
    def __init__(self, options: PassOptions, advance: Advance = no_progress) -> None:
        self.options = options
        self.config = options.config
        # Told how many more files are done, as they are (the audit's progress).
        self.advance = advance
        self._executor: Executor | None = None

    def _on(self, files: int) -> Executor:
        options = self.options
        self._executor = options.workers.executor(
            options.rules, self.config, options.regions, files
        )
        return self._executor

    def collect(
        self, sources: Sequence[Source], known: Mapping[str, Any] | None = None
    ) -> dict[int, ModuleFacts | Finding]:
        """Parse ``sources`` and collect their facts (by ``Source.number``); the trees
        of those whose findings are asked for (``Source.report``) are kept for the check.
        ``known``: the facts of the project's other files, by key (already in memory)."""
        jobs = [(s.number, s.key, s.data, s.report) for s in sources]
        return self._on(len(jobs)).first_pass(jobs, known or {}, self.advance)

    def check(
        self,
        sources: Sequence[Source],
        rules: Sequence[type[Rule]],
        project: ProjectIndex,
        known_codes: frozenset[str] | None,
    ) -> dict[int, CheckOutcome]:
        """Run ``rules`` over ``sources`` (files that parsed): outcomes by number.

        ``known_codes``: see :func:`swacheck.engine.checker.check_parsed`."""
        jobs = [(s.number, s.key, s.relative, s.data) for s in sources]
        if not jobs:
            return {}
        return self._on(len(jobs)).check(jobs, rules, project, known_codes, self.advance)

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
        """Fix one file until no fixable finding is left (nothing is written here)."""
        job = (source.number, source.key, source.relative, source.data)
        return self._on(1).fix(
            job, source.display, findings, rules, project, known_codes, unsafe=unsafe, diff=diff
        )

    def close(self) -> None:
        self.options.workers.release()
