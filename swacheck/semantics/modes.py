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
from swacheck.semantics.terms import Attr, Const, Global, Guard, Index, Literal, Param, Term


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
    if _swa_layer_test(key, model):
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


def _swa_layer_test(key: Term, model: Model) -> bool:
    """``<pool>.layers_mapping[layer_id][1]``: true exactly for an SWA layer (the model's
    ``layer-tables``)."""
    return (
        isinstance(key, Index)
        and key.index == Const(1)
        and isinstance(key.base, Index)
        and isinstance(key.base.base, Attr)
        and key.base.base.name in model.layer_tables
    )


def outside_hybrid(guard: Guard, model: Model) -> bool:
    """Whether ``guard`` holds only outside hybrid-SWA mode. An SWA-side value found
    ``None`` says so only where nothing else on the path says hybrid (an SWA layer's
    batch may lack a value of its own)."""
    states = [(_states(literal, model), is_presence(literal[0], model)) for literal in guard]
    if any(state is False and not presence for state, presence in states):
        return True
    return any(state is False for state, _ in states) and not any(state for state, _ in states)


def is_presence(key: Term, model: Model) -> bool:
    """An ``is None`` test of an SWA location (``forward_batch.out_cache_loc_swa``,
    ``metadata.swa_page_table``): whether the batch carries one, which outside hybrid
    mode it never does, and inside it may not (not a pool's or the table's test)."""
    value = is_none_test(key)
    name = _name(value) if value is not None else None
    return name is not None and model.swa_role(name) is not None


def _states(literal: Literal, model: Model) -> bool | None:
    key, holds = literal
    polarity = hybrid_polarity(key, model)
    if polarity is None:
        return None
    return polarity == holds
