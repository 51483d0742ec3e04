"""The configured names, compiled once per audit, and the small syntax helpers rules share."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from swacheck.config import Config


@dataclass(frozen=True)
class Names:
    """Everything a rule asks of a name: is it an SWA location, a mapping table, ...?"""

    config: Config

    @cached_property
    def _swa_loc(self) -> re.Pattern[str]:
        return re.compile(self.config.swa_loc_pattern, re.IGNORECASE)

    def is_swa_loc(self, name: str) -> bool:
        return self._swa_loc.search(name) is not None

    def is_mapping(self, name: str) -> bool:
        return name in self.config.mapping_attributes

    def is_invalidate(self, name: str) -> bool:
        return name in self.config.invalidate_methods

    def is_translate(self, name: str) -> bool:
        return name in self.config.translate_methods


def dotted_name(node: cst.CSTNode) -> str | None:
    """``torch.cuda.graph`` for an Attribute/Name chain, else ``None``."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr.value}" if base is not None else None
    return None


def target_name(node: cst.CSTNode) -> str | None:
    """The name a binding target stores to: ``x``, ``self.x`` -> ``x``, ``d["x"]`` -> ``x``.

    Only literal string subscripts count for dict keys; other subscripts (slices,
    computed keys) store *into* a tensor and have no name of their own.
    """
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        index = node.slice[0].slice
        if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
            value = index.value.evaluated_value
            return value if isinstance(value, str) else None
    return None


def call_name(call: cst.Call) -> str | None:
    """The called function or method's last name (``x.y.zero_()`` -> ``zero_``)."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None
