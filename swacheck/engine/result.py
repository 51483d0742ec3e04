"""What an audit returns: findings and errors, what it did, and what its fixes changed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from swacheck.finding import Finding


@dataclass
class AuditResult:
    findings: list[Finding] = field(default_factory=list)
    # Problems that are not findings ("internal error" ones make the exit status 2).
    errors: list[str] = field(default_factory=list)
    # Non-fatal notes for the user (a .gitignore line skipped, a symlink not followed).
    warnings: list[str] = field(default_factory=list)
    # Files findings were asked for (given, found under a given folder, or documents).
    files_seen: int = 0
    files_parsed: int = 0
    # Project files parsed for their facts (not found in memory or the cache).
    facts_parsed: int = 0
    # Project files left out of the context (``Workspace.audit(complete=False)``): not
    # read yet (no recorded state), or read but their facts not known yet.
    left_out: int = 0
    fixes_applied: int = 0
    # Suppression comments ``add_noqa`` wrote or extended.
    noqa_added: int = 0
    diffs: list[str] = field(default_factory=list)
    # Rules that did not apply to this audit (DESIGN.md's scope rules), with the reason.
    inactive: dict[str, str] = field(default_factory=dict)
    # The findings ``--fix`` (or ``--diff``) fixed.
    fixed: list[Finding] = field(default_factory=list)
    # In-memory documents a fix changed: shown path -> fixed bytes (never written).
    fixed_documents: dict[str, bytes] = field(default_factory=dict)
    # Each reported file's shown path -> its path, so callers can map findings back.
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def partial(self) -> bool:
        """Whether some project file was left out of the context."""
        return self.left_out > 0

    def findings_for(self, path: Path) -> list[Finding]:
        """The findings of one reported file (``path`` as it was given)."""
        shown = {p: name for name, p in self.files.items()}.get(path)
        return [f for f in self.findings if f.path == shown]


@dataclass
class CheckOutcome:
    """One file's check: its findings, kept in the cache by the check's inputs."""

    findings: list[Finding] = field(default_factory=list)
    # Rules that raised: "<code>: <exception>" (an internal error, not a crash of the run).
    errors: list[str] = field(default_factory=list)
