"""The hybrid-SWA mode: which branch literals hold exactly in it, or exactly outside it.

Outside hybrid-SWA mode the full and SWA index spaces are one and there is no
translation cache, so what a branch guarded that way does is no concern of the
invariants. A literal states the mode when its test is a mode flag (``is_hybrid_swa``,
``use_sliding_window_kv_pool``: the model's ``flag-pattern``), an ``isinstance`` test
against one of the model's hybrid classes (or any class named for SWA), a ``hasattr``
test of a configured mapping, translate or invalidate name, or an ``is None`` test of a
value named for the SWA side (``self._swa_kv_pool is None``, the mapping).
"""

from __future__ import annotations

from swacheck.semantics.guards import called, is_none_test
from swacheck.semantics.model import Model
from swacheck.semantics.terms import Attr, Const, Global, Guard, Literal, Param, Term


def _name(term: Term) -> str | None:
    if isinstance(term, Attr):
        return term.name
    if isinstance(term, Param):
        return term.name
    if isinstance(term, Global):
        return term.name.rsplit(".", 1)[-1]
    return None


def hybrid_polarity(key: Term, model: Model) -> bool | None:
    """Whether a literal's key being true means hybrid-SWA mode (True), its absence
    (False), or neither (None)."""
    name = _name(key)
    if name is not None and model.is_mode_flag(name):
        return True
    tested = called(key, "isinstance")
    if tested is not None and len(tested.args) == 2:
        classes = tested.args[1]
        names = [_name(c) for c in getattr(classes, "items", (classes,))]
        if any(n is not None and (n in model.mode_classes or model.is_swa_word(n)) for n in names):
            return True
        return None
    tested = called(key, "hasattr")
    if tested is not None and len(tested.args) == 2 and isinstance(tested.args[1], Const):
        attribute = tested.args[1].value
        if isinstance(attribute, str) and (
            attribute in model.mapping_attributes
            or attribute in model.translate_methods
            or attribute in model.invalidate_methods
        ):
            return True
        return None
    value = is_none_test(key)
    if value is not None:
        name = _name(value)
        if name is not None and (model.is_mapping_name(name) or model.is_swa_word(name)):
            return False
    return None


def outside_hybrid(guard: Guard, model: Model) -> bool:
    """Whether ``guard`` holds only outside hybrid-SWA mode."""
    return any(_states(literal, model) is False for literal in guard)


def _states(literal: Literal, model: Model) -> bool | None:
    key, holds = literal
    polarity = hybrid_polarity(key, model)
    if polarity is None:
        return None
    return polarity == holds
