"""Which mapping rows a write covers and what it writes (``analysis/sentinel``, SWA011),
on real libcst trees."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from swacheck.analysis.names import Names
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
