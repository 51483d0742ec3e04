"""The sanitizer's summary: checks run and violations by kind, as text and JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .violations import KINDS, Violation


@dataclass(frozen=True)
class SanitizerReport:
    level: str
    action: str
    # Checks run, by the violation kind each one guards against.
    checks: dict[str, int]
    # Violations by kind, every kind present (zero when clean).
    counts: dict[str, int]
    # The first violations of each kind, with their evidence.
    violations: tuple[Violation, ...] = ()
    # Watched objects by role.
    watched: dict[str, int] = field(default_factory=dict)

    @property
    def total_violations(self) -> int:
        return sum(self.counts.values())

    @property
    def total_checks(self) -> int:
        return sum(self.checks.values())

    @property
    def ok(self) -> bool:
        return self.total_violations == 0

    def to_dict(self) -> dict[str, object]:
        return {
            "level": self.level,
            "action": self.action,
            "checks_run": self.total_checks,
            "checks": {k: self.checks.get(k, 0) for k in KINDS},
            "violations": self.total_violations,
            "counts": dict(self.counts),
            "watched": dict(self.watched),
            "details": [v.to_dict() for v in self.violations],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def summary_line(self) -> str:
        found = ", ".join(f"{k}: {n}" for k, n in self.counts.items() if n)
        return (
            f"swa-sanitizer ({self.level}): {self.total_checks} checks, "
            f"{self.total_violations} violations" + (f" ({found})" if found else "")
        )

    def to_text(self) -> str:
        lines = [self.summary_line()]
        lines += [
            f"  {kind}: {self.checks.get(kind, 0)} checks, {self.counts[kind]} violations"
            for kind in KINDS
        ]
        lines += [f"  - {v}" for v in self.violations]
        return "\n".join(lines)
