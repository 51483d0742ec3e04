"""The base of the order rules (SWA001, SWA004, SWA005, SWA007): their shared scope."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from swacheck.analysis.scope import ScopeFacts, activation, config_terms, scope_facts
from swacheck.rule import Rule

if TYPE_CHECKING:
    from swacheck.analysis.index import ProjectIndex
    from swacheck.config import Config
    from swacheck.context import FileContext


class OrderRule(Rule):
    """Base of the order rules (SWA001, SWA004, SWA005, SWA007): their shared scope.

    They read method summaries, apply only where the audit defines an invalidation
    method (decided on raw bytes before parsing, then on the parsed facts), and share
    one per-file :class:`ScopeFacts`. Their trigger set is the configured names
    (``config_terms``); a rule may add to it.
    """

    uses_summaries = True

    @classmethod
    def triggers(cls, config: Config) -> frozenset[str] | None:
        return config_terms(config)

    @classmethod
    def activation(cls, config: Config) -> tuple[frozenset[str], re.Pattern[bytes]]:
        return activation(config)

    @classmethod
    def inactive_reason(cls, project: ProjectIndex, config: Config) -> str | None:
        if order_rule_active(cls.code, project):
            return None
        return f"no audited file defines {', '.join(config.invalidate_methods)}"

    @classmethod
    def collect_facts(cls, context: FileContext) -> ScopeFacts:
        return scope_facts(context)


def order_rule_active(code: str, project: Any) -> bool:
    """DESIGN.md's scope rule: some audited file defines an invalidation method."""
    return any(
        isinstance(facts, ScopeFacts) and facts.defines_invalidate
        for _, facts in project.rule_facts(code)
    )
