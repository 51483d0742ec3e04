"""The sound prefilter: skip parsing files that cannot hold a finding.

Each enabled rule declares triggers (:mod:`swacheck.triggers`) without which it can
neither fire in a file nor need facts from it; a file matching none of them is never
parsed. A rule without triggers (``None``) disables the prefilter for the audit:
soundness over speed.
"""

from __future__ import annotations

from collections.abc import Iterable

from swacheck.catalogue import RuleSpec
from swacheck.triggers import FileText, TriggerSet


class Prefilter:
    def __init__(self, rules: Iterable[RuleSpec]) -> None:
        self.triggers: TriggerSet | None = None
        collected: set[str] = set()
        for rule in rules:
            if rule.triggers is None:
                return
            collected |= rule.triggers
        self.triggers = TriggerSet(collected)

    def wants(self, data: bytes | FileText) -> bool:
        return self.triggers is None or self.triggers.matches(data)
