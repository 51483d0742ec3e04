"""The Fixit peer of SWA002 for the speed benchmark: the same check, written as Fixit does.

Flags an assignment to an SWA-location name (same default pattern as swacheck) whose
value is a torch factory call or cast with an int64 dtype. Fixit has no prefilter, so it
parses every file with libcst and resolves its metadata: that is what the benchmark
compares against.
"""

from __future__ import annotations

import re

import libcst as cst
from fixit import Invalid, LintRule, Valid

_SWA_LOC = re.compile(
    r"^(?!.*mapping)(?=(?:.*_)?swa(?:_.*)?$)(?=.*(?:loc|slot|indices|index)).*$", re.IGNORECASE
)
_INT64 = {"int64", "long"}


def _name(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def _int64_dtype(call: cst.Call) -> bool:
    for arg in call.args:
        value = arg.value
        is_dtype = arg.keyword is None or arg.keyword.value == "dtype"
        if (
            is_dtype
            and isinstance(value, cst.Attribute)
            and isinstance(value.value, cst.Name)
            and value.value.value == "torch"
            and value.attr.value in _INT64
        ):
            return True
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "long"


class SwaLocInt64(LintRule):
    VALID = [Valid("out_cache_loc_swa = torch.zeros(8, dtype=torch.int32)")]
    INVALID = [Invalid("out_cache_loc_swa = torch.zeros(8, dtype=torch.int64)")]

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if isinstance(value, cst.IfExp):
            value = value.body
        if not isinstance(value, cst.Call) or not _int64_dtype(value):
            return
        for target in node.targets:
            name = _name(target.target)
            if name and _SWA_LOC.search(name):
                self.report(node, "SWA location created as int64")
