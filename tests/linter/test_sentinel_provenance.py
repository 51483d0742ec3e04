"""Which mapping rows a write covers (``analysis/sentinel``, SWA011) and which side of the
translation a value comes from (``analysis/provenance``, SWA009), on real libcst trees."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from swacheck.analysis.names import Names
from swacheck.analysis.provenance import full_side, is_swa_side
from swacheck.analysis.sentinel import construction, fill_value, region_of
from swacheck.config import Config

NAMES = Names(Config())


def _function(source: str) -> cst.FunctionDef:
    module = cst.parse_module(textwrap.dedent(source))
    function = module.body[0]
    assert isinstance(function, cst.FunctionDef)
    return function


def _last_expression(function: cst.FunctionDef) -> cst.BaseExpression:
    line = function.body.body[-1]
    assert isinstance(line, cst.SimpleStatementLine)
    statement = line.body[0]
    if isinstance(statement, cst.Expr):
        return statement.value
    assert isinstance(statement, cst.Assign | cst.Return)
    assert statement.value is not None
    return statement.value


@pytest.mark.parametrize(
    ("expr", "rows"),
    [
        ("self.full_to_swa_index_mapping", (True, True)),
        ("self.full_to_swa_index_mapping[:]", (True, True)),
        ("self.full_to_swa_index_mapping[...]", (True, True)),
        ("self.full_to_swa_index_mapping[:-1]", (True, False)),
        ("self.full_to_swa_index_mapping[1:]", (False, True)),
        ("self.full_to_swa_index_mapping[1:-1]", (False, False)),
        ("self.full_to_swa_index_mapping[-1]", (False, True)),
        ("self.full_to_swa_index_mapping[0]", (True, False)),
        # an end that cannot be read: the last row counts as not covered
        ("self.full_to_swa_index_mapping[:n]", (True, False)),
        ("self.full_to_swa_index_mapping.view(-1)[:]", (True, True)),
        ("alias", (True, True)),  # through the local bound below
        ("head", (True, False)),
    ],
)
def test_rows_a_write_covers(expr: str, rows: tuple[bool, bool]) -> None:
    function = _function(
        f"""
        def clear(self):
            alias = self.full_to_swa_index_mapping
            head = alias[:-1]
            {expr}
        """
    )
    region = region_of(_last_expression(function), NAMES, function)
    assert region is not None and (region.first, region.last) == rows


@pytest.mark.parametrize(
    "expr",
    [
        "self.full_to_swa_index_mapping[free_index]",  # indices unknown
        "self.other_table",
        "twice",  # bound twice: no single value
    ],
)
def test_rows_that_cannot_be_read_off_the_text(expr: str) -> None:
    function = _function(
        f"""
        def clear(self, free_index, n):
            twice = self.full_to_swa_index_mapping
            twice = self.other_table
            {expr}
        """
    )
    assert region_of(_last_expression(function), NAMES, function) is None


@pytest.mark.parametrize(
    ("source", "built"),
    [
        ("torch.cat([torch.zeros(n + 1), torch.tensor([-1])])", (-1, 0)),
        ("torch.cat((torch.arange(n), torch.full((1,), -1)))", (-1, 0)),
        ("torch.zeros(n + 1, dtype=torch.int64)", (None, 0)),
        ("torch.empty(n + 1, dtype=torch.int64)", (None, None)),
        ("mapping", None),  # a table shared from elsewhere: nothing built
    ],
)
def test_constructions(source: str, built: tuple[int | None, int | None] | None) -> None:
    assert construction(cst.parse_expression(source)) == built


@pytest.mark.parametrize(
    ("source", "value"),
    [("0", 0), ("-1", -1), ("torch.zeros_like(m)", 0), ("torch.full((4,), -1)", -1), ("x", None)],
)
def test_fill_values(source: str, value: int | None) -> None:
    assert fill_value(cst.parse_expression(source)) == value


@pytest.mark.parametrize(
    ("value", "origin"),
    [
        ("forward_batch.out_cache_loc", "`forward_batch.out_cache_loc`"),
        ("self.req_to_token[rows, :n] // self.page_size", "`self.req_to_token` pages"),
        ("metadata.page_table.to(torch.int32)", "`metadata.page_table`"),
        ("out_cache_loc if bs else None", "`out_cache_loc`"),
        ("local", "`forward_batch.out_cache_loc`"),
        ("out_cache_loc if bs else translated", None),
        ("self.pool.translate_loc_from_full_to_swa(forward_batch.out_cache_loc)", None),
        ("self.full_to_swa_index_mapping[forward_batch.out_cache_loc]", None),
        ("mixed", None),
    ],
)
def test_full_side_values(value: str, origin: str | None) -> None:
    function = _function(
        f"""
        def f(self, forward_batch, out_cache_loc, bs, translated, c):
            local = forward_batch.out_cache_loc[:bs]
            mixed = forward_batch.out_cache_loc
            mixed = self.pool.translate_loc_from_full_to_swa(mixed)
            x = {value}
        """
    )
    assert full_side(_last_expression(function), function) == origin


@pytest.mark.parametrize(
    ("value", "swa"),
    [
        ("pool.translate_loc_from_full_to_swa(x)", True),
        ("self.kv_index_translator.write_ids(batch, kind)", True),
        ("self.full_to_swa_index_mapping[x]", True),
        ("kernel[grid](x, self.full_to_swa_index_mapping)", True),
        ("self._maybe_translate_swa(page_table)", True),
        ("metadata.swa_page_table[:bs]", True),
        ("forward_batch.out_cache_loc", False),
        ("torch.zeros(n)", False),
    ],
)
def test_swa_side_values(value: str, swa: bool) -> None:
    assert is_swa_side(cst.parse_expression(value), NAMES) is swa
