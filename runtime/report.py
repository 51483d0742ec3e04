"""The sanitizer's summary: checks run and violations by kind, as text and JSON; for a
distributed run, the summary merged over the ranks (``distributed.py`` merges)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .violations import KINDS, Violation, plural


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
    # Watched objects by role; each watched pool's cache model by label (``CacheModel.kind``);
    # instances of classes named for watching that play no role, by class (left alone).
    watched: dict[str, int] = field(default_factory=dict)
    cache_models: dict[str, str] = field(default_factory=dict)
    left_alone: dict[str, int] = field(default_factory=dict)
    # Merged over the ranks of a distributed run: how many ranks, each reporting rank's
    # violations by kind (a rank missing here sent no report), and the error that ended
    # each rank that failed.
    world_size: int = 1
    per_rank: dict[int, dict[str, int]] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)

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
            "cache_models": dict(self.cache_models),
            "left_alone": dict(self.left_alone),
            "details": [v.to_dict() for v in self.violations],
            "world_size": self.world_size,
            "per_rank": {str(rank): dict(c) for rank, c in self.per_rank.items()},
            "errors": {str(rank): e for rank, e in self.errors.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SanitizerReport:
        """The inverse of :meth:`to_dict`: how a report travels between ranks."""
        return cls(
            level=data["level"],
            action=data["action"],
            checks=dict(data["checks"]),
            counts=dict(data["counts"]),
            violations=tuple(Violation.from_dict(v) for v in data["details"]),
            watched=dict(data["watched"]),
            cache_models=dict(data.get("cache_models", {})),
            left_alone=dict(data.get("left_alone", {})),
            world_size=data.get("world_size", 1),
            per_rank={int(r): dict(c) for r, c in data.get("per_rank", {}).items()},
            errors={int(r): e for r, e in data.get("errors", {}).items()},
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def summary_line(self) -> str:
        found = ", ".join(f"{k}: {n}" for k, n in self.counts.items() if n)
        ranks = f", {self.world_size} ranks" if self.world_size > 1 else ""
        return (
            f"swa-sanitizer ({self.level}{ranks}): {plural(self.total_checks, 'check')}, "
            f"{plural(self.total_violations, 'violation')}" + (f" ({found})" if found else "")
        )

    def to_text(self) -> str:
        lines = [self.summary_line()]
        if self.watched:
            lines.append(
                "  watched: " + ", ".join(f"{n} {role}" for role, n in sorted(self.watched.items()))
            )
        lines += [f"  pool {label}: {kind}" for label, kind in sorted(self.cache_models.items())]
        lines += [
            f"  left alone: {n} {label} (plays none of the roles)"
            for label, n in sorted(self.left_alone.items())
        ]
        # Kinds never checked (and never violated) say nothing about this run.
        lines += [
            f"  {kind}: {plural(self.checks.get(kind, 0), 'check')}, "
            f"{plural(self.counts.get(kind, 0), 'violation')}"
            for kind in KINDS
            if self.checks.get(kind, 0) or self.counts.get(kind, 0)
        ]
        if self.world_size > 1:
            lines += [f"  rank {rank}: {self._rank_line(rank)}" for rank in range(self.world_size)]
        for violation in self.violations:
            first, *rest = str(violation).splitlines()
            lines += [f"  - {first}", *(f"    {line}" for line in rest)]
        return "\n".join(lines)

    def _rank_line(self, rank: int) -> str:
        if rank not in self.per_rank:
            found = "no report (still inside a collective when the run was aborted)"
        else:
            found = ", ".join(f"{k}: {n}" for k, n in self.per_rank[rank].items() if n) or "clean"
        return found + (f"; ended by {self.errors[rank]}" if rank in self.errors else "")
