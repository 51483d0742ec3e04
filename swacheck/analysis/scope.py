"""What the order rules learn about each file in the first pass: the facts their scope
(DESIGN.md's scope rules) and the method summaries' file set are decided on.

Config-aware but plain data (:class:`ScopeFacts`), collected once per file for the four
order rules and carried by worker processes and the cache like every first-pass fact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from swacheck.analysis.modes import is_swa_word

if TYPE_CHECKING:
    from swacheck.config import Config
    from swacheck.context import FileContext

# The rules that share the scope facts below (their collect_facts return them).
ORDER_RULES = ("SWA001", "SWA004", "SWA005", "SWA007")


def config_terms(config: Config) -> frozenset[str]:
    """The configured names every order rule's prefilter includes."""
    return frozenset(
        {*config.mapping_attributes, *config.invalidate_methods, *config.translate_methods}
    )


def relevant_text(text: str, config: Config) -> bool:
    """Whether a file takes part in summaries: it holds a configured name (any case)."""
    lowered = text.lower()
    return any(term.lower() in lowered for term in config_terms(config))


@dataclass(frozen=True)
class ScopeFacts:
    """What the order rules learn about each file in the first pass (picklable)."""

    relevant: bool
    defines_invalidate: bool
    # The file holds an SWA word (``is_swa_word``) or a configured name.
    mentions_swa: bool = False


def activation(config: Config) -> tuple[frozenset[str], re.Pattern[bytes]]:
    """The order rules apply only where some audited file defines an invalidation method."""
    names = "|".join(re.escape(name) for name in config.invalidate_methods)
    pattern = re.compile(rf"\bdef\s+(?:{names})\s*\(".encode())
    return frozenset(config.invalidate_methods), pattern


def scope_facts(context: FileContext) -> ScopeFacts:
    """This file's :class:`ScopeFacts` (memoised: the four rules share one)."""

    def compute() -> ScopeFacts:
        config = context.config
        defines = any(
            re.search(rf"\bdef\s+{re.escape(name)}\s*\(", context.text)
            for name in config.invalidate_methods
        )
        relevant = relevant_text(context.text, config)
        mentions = relevant or is_swa_word(context.text)
        return ScopeFacts(relevant, defines, mentions)

    return context.memo(("swacheck.order.scope",), compute)
