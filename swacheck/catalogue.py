"""The rules as the engine sees them before it parses anything: one :class:`RuleSpec` each.

Selecting rules, the scope check on raw bytes (``activation``), the prefilter and the
run cache need only each rule's code, names and trigger text; none of them needs the
rule's visitor. The visitors subclass libcst's, and importing libcst costs about a
quarter of a second, which is most of a pre-commit call on a file no rule can fire in
and of a warm audit. So the catalogue of the configured rule set is kept in the result
cache (keyed by swacheck's version and source and the configuration) and libcst is
imported only when some file has to be parsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from swacheck.config import Config
from swacheck.triggers import Trigger

if TYPE_CHECKING:
    from swacheck.engine.cache import ResultCache
    from swacheck.rule import Rule

Activation = tuple[frozenset[str], re.Pattern[bytes]]


@dataclass(frozen=True)
class RuleSpec:
    """One rule's declarations under one configuration (see :class:`swacheck.rule.Rule`)."""

    code: str
    name: str
    summary: str
    triggers: frozenset[Trigger] | None
    activation: Activation | None
    # Why the rule does not apply where no file opens its scope (``activation``), in its
    # own words: what it says of a project with no file at all.
    scope_needs: str
    region_safe: bool
    # The class itself when the spec was made from it (tests hand in rule classes that
    # are not registered); a spec read from the cache finds its class by code.
    rule: type[Rule] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, rule: type[Rule], config: Config) -> RuleSpec:
        activation = rule.activation(config)
        needs = ""
        if activation is not None:
            from swacheck.analysis.index import ProjectIndex

            needs = rule.inactive_reason(ProjectIndex(), config) or ""
        return cls(
            code=rule.code,
            name=rule.name,
            summary=rule.summary,
            triggers=rule.triggers(config),
            activation=activation,
            scope_needs=needs,
            region_safe=rule.region_safe,
            rule=rule,
        )

    def load(self) -> type[Rule]:
        """The rule class (imports the rule, and with it libcst)."""
        if self.rule is not None:
            return self.rule
        from swacheck.rules import rule_by_code

        rule = rule_by_code(self.code)
        if rule is None:  # the catalogue is keyed by swacheck's source: cannot happen
            raise LookupError(f"rule {self.code} is in the catalogue but not installed")
        return rule


def catalogue(config: Config, cache: ResultCache | None = None) -> tuple[RuleSpec, ...]:
    """Every rule's spec under ``config``, from ``cache`` when it holds them."""
    key = cache.key("catalogue", b"") if cache is not None else ""
    if cache is not None:
        hit = cache.get(key)
        if isinstance(hit, tuple) and all(isinstance(spec, RuleSpec) for spec in hit):
            return hit
    from swacheck.rules import all_rules

    specs = tuple(RuleSpec.of(rule, config) for rule in all_rules())
    if cache is not None:
        cache.put(key, tuple(replace(spec, rule=None) for spec in specs))
    return specs


def spec_of(rule: RuleSpec | type[Rule], config: Config) -> RuleSpec:
    """``rule`` as a spec: the engine's entry points take either."""
    return rule if isinstance(rule, RuleSpec) else RuleSpec.of(rule, config)
