"""One-shot audits, for tests and scripts: a :class:`~swacheck.engine.workspace.Workspace`
made for the call.

``audit_paths`` audits files and folders as the command line does (in the context of
their project); ``audit_sources`` writes in-memory files to a folder first, so that a
rule's examples run through the very same engine, ``--fix`` included.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from swacheck.catalogue import RuleSpec
from swacheck.config import Config
from swacheck.engine.result import AuditResult
from swacheck.engine.workspace import Workspace

if TYPE_CHECKING:
    from swacheck.rule import Rule

__all__ = ["AuditOptions", "AuditResult", "audit_paths", "audit_sources"]


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


def audit_paths(paths: Iterable[Path], options: AuditOptions) -> AuditResult:
    given = list(paths)
    workspace = Workspace.for_paths(
        given,
        options.config,
        options.rules,
        cache=options.cache,
        jobs=options.jobs,
        prefilter=options.prefilter,
    )
    return workspace.audit(
        given, fix=options.fix, unsafe_fixes=options.unsafe_fixes, diff=options.diff
    )


def audit_sources(
    sources: Mapping[str, str], options: AuditOptions, root: Path | None = None
) -> AuditResult:
    """Audit in-memory files (``{relative path: text}``) by writing them under ``root``."""
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
