"""The rules: one module per rule, ``swaNNN_<name>.py``, each holding one ``Rule`` subclass.

Discovered by module name, so adding a rule is adding a file.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from swacheck.rule import Rule

# Importing this package stays cheap (no libcst): the engine reads the rule set's
# declarations from its catalogue (``swacheck.catalogue``) before anything is parsed.
_RULE_MODULE = re.compile(r"^swa\d{3}_\w+$")


@cache
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class, sorted by code."""
    from swacheck.rule import Rule

    found: list[type[Rule]] = []
    for info in pkgutil.iter_modules(__path__):
        if not _RULE_MODULE.match(info.name):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Rule)
                and value is not Rule
                and value.__module__ == module.__name__
            ):
                found.append(value)
    return tuple(sorted(found, key=lambda rule: rule.code))


def rule_by_code(code: str) -> type[Rule] | None:
    for rule in all_rules():
        if rule.code == code.upper():
            return rule
    return None
