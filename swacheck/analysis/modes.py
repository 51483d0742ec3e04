"""The hybrid-SWA mode: which names and guards state it.

The order rules reason about the hybrid-SWA configuration, so a branch that a mode guard
(``if self.is_hybrid_swa:``, ``if hasattr(pool, "invalidate_loc_cache"):``) excludes is
pruned. :func:`guard_key` describes a test without the configuration (it is part of the
first-pass facts); :func:`swa_guard_polarity` decides with it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from swacheck.analysis.names import dotted_name

if TYPE_CHECKING:
    from swacheck.analysis.names import Names


def guard_key(test: cst.BaseExpression | None) -> str | None:
    """A config-free description of a test that may be a mode guard.

    ``name:is_hybrid_swa`` (a name or attribute), ``hasattr:<attr>``,
    ``isinstance:<Class>``; a leading ``!`` for ``not``.
    """
    if test is None:
        return None
    negated = False
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        negated = not negated
        test = test.expression
    key = None
    if isinstance(test, cst.Name | cst.Attribute):
        name = dotted_name(test)
        if name:
            key = f"name:{name.rsplit('.', 1)[-1]}"
    elif isinstance(test, cst.Call) and isinstance(test.func, cst.Name):
        args = [a.value for a in test.args]
        if test.func.value == "hasattr" and len(args) == 2:
            if isinstance(args[1], cst.SimpleString) and isinstance(args[1].evaluated_value, str):
                key = f"hasattr:{args[1].evaluated_value}"
        elif test.func.value == "isinstance" and len(args) == 2:
            name = dotted_name(args[1])
            if name:
                key = f"isinstance:{name.rsplit('.', 1)[-1]}"
    if key is None:
        return None
    return f"!{key}" if negated else key


# Kept in step with the prefilter's ``word("swa")``/``exact("SWA")`` triggers.
_SWA_WORD = re.compile(r"SWA|(?<![A-Za-z0-9])swa(?![A-Za-z0-9])")


def is_swa_word(name: str) -> bool:
    """``is_hybrid_swa``, ``swa_pool``, ``SWAKVPool`` (not ``swap``)."""
    return _SWA_WORD.search(name) is not None


# A flag that states the SWA mode itself: a predicate (``is_``, ``has_``, ``use_``,
# ``enable_``...) whose subject is SWA, such as ``is_hybrid_swa``, ``has_swa``, ``use_swa``,
# ``is_swa_enabled``. Flags that only mention SWA choose a sub-mode or a layer kind
# (``_swa_req_ring``, ``is_swa_layer``, ``is_hybrid_swa_compress``, ``_skip_swa``): in SWA
# mode they go either way, so their branches are both kept.
_SWA_MODE_FLAG = re.compile(
    r"_?(is|has|use|uses|using|enable|enabled|with)_(\w+_)?swa(_enabled|_mode|_model)?",
    re.IGNORECASE,
)


def is_swa_mode_flag(name: str) -> bool:
    return _SWA_MODE_FLAG.fullmatch(name) is not None


def swa_guard_polarity(key: str, names: Names) -> bool | None:
    """True/False when the guard ``key`` holds exactly in SWA mode / outside it, else None."""
    negated = key.startswith("!")
    kind, _, value = key.lstrip("!").partition(":")
    if kind == "name":
        hit = is_swa_mode_flag(value)
    elif kind == "hasattr":
        hit = names.is_invalidate(value) or names.is_translate(value) or names.is_mapping(value)
    elif kind == "isinstance":
        hit = is_swa_word(value)
    else:
        hit = False
    if not hit:
        return None
    return not negated
