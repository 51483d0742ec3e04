"""The sound prefilter: skip parsing files that cannot hold a finding.

Each enabled rule declares triggers (:mod:`swacheck.triggers`) without which it can
neither fire in a file nor need facts from it; a file matching none of them is never
parsed. A rule without triggers (``None``) disables the prefilter for the audit:
soundness over speed.
"""

from __future__ import annotations

from collections.abc import Iterable

from swacheck.config import Config
from swacheck.rule import Rule
from swacheck.triggers import TriggerSet


class Prefilter:
    def __init__(self, rules: Iterable[type[Rule]], config: Config, enabled: bool = True) -> None:
        self.triggers: TriggerSet | None = None
        if not enabled:
            return
        collected: set[str] = set()
        for rule in rules:
            rule_triggers = rule.triggers(config)
            if rule_triggers is None:
                return
            collected |= rule_triggers
        self.triggers = TriggerSet(collected)

    def wants(self, data: bytes) -> bool:
        return self.triggers is None or self.triggers.matches(data)
