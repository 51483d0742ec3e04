"""Where a local's value leaves its function (``swacheck.analysis.escapes``)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from swacheck.analysis.escapes import escape_of


def _escape(source: str) -> str | None:
    function = cst.parse_module(textwrap.dedent(source)).body[0]
    assert isinstance(function, cst.FunctionDef)
    first = function.body.body[0]
    assert isinstance(first, cst.SimpleStatementLine)
    binding = first.body[0]
    escape = escape_of(function, binding, "x")
    return escape.how if escape is not None else None


@pytest.mark.parametrize(
    ("source", "how"),
    [
        ("def f(a):\n    x = a.long()\n    return x\n", "returned"),
        ("def f(a):\n    x = a.long()\n    return x[:4].contiguous(), a\n", "returned"),
        ("def f(self, a):\n    x = a.long()\n    self.buf = x\n", "stored in `self.buf`"),
        ("def f(b, a):\n    x = a.long()\n    b['swa_loc'] = x\n", "stored in `b['swa_loc']`"),
        ("def f(a):\n    x = a.long()\n    k[(1,)](x.view(-1))\n", "passed to the kernel `k`"),
        # ``x += 1`` keeps the same tensor
        ("def f(a):\n    x = a.long()\n    x += 1\n    return x\n", "returned"),
    ],
)
def test_escapes(source: str, how: str) -> None:
    assert _escape(source) == how


@pytest.mark.parametrize(
    "source",
    [
        # converted again before it leaves
        "def f(a):\n    x = a.long()\n    x = x.int()\n    return x\n",
        # rebound by a loop
        "def f(a, bs):\n    x = a.long()\n    for x in bs:\n        pass\n    return x\n",
        # only host-side use, a plain call, a list made of it
        "def f(a, alloc):\n    x = a.long()\n    alloc.free(x)\n    return x.tolist()\n",
        # a nested function's return is not this function's
        "def f(a):\n    x = a.long()\n    def g():\n        return x\n    return g\n",
    ],
)
def test_stays_local(source: str) -> None:
    assert _escape(source) is None
