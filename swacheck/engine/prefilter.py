"""The sound prefilter: skip parsing files that cannot hold a finding.

Each enabled rule declares trigger patterns (regular expressions, matched
case-insensitively on the raw bytes) without which it cannot fire; a file matching
none of them is never parsed. A rule without triggers
(``None``) disables the prefilter for the audit: soundness over speed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from swacheck.config import Config
from swacheck.rule import Rule


class Prefilter:
    def __init__(self, rules: Iterable[type[Rule]], config: Config, enabled: bool = True) -> None:
        triggers: set[str] = set()
        self.pattern: re.Pattern[bytes] | None = None
        if not enabled:
            return
        for rule in rules:
            rule_triggers = rule.triggers(config)
            if rule_triggers is None:
                return
            triggers |= rule_triggers
        alternatives = sorted(t.encode() for t in triggers)
        # No triggers at all (no rule enabled): nothing can fire, nothing to parse.
        self.pattern = re.compile(b"|".join(alternatives) or b"(?!)", re.IGNORECASE)

    def wants(self, data: bytes) -> bool:
        return self.pattern is None or self.pattern.search(data) is not None
