"""``branches.may_run``: a line is ruled out only when module flags prove its branch is
not taken; everything data-dependent stays possible. Each case marks its lines with a
comment (``# may`` or ``# never``) and the test reads them off the source."""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

import pytest
import torch

from swacheck.runtime.branches import may_run

_is_npu = False
_is_cuda_alike = True
_PLATFORM = "cuda"
mapping = torch.zeros(8)


def if_else(i: torch.Tensor) -> None:
    if _is_npu:
        mapping[i.long()] = 1  # never
    else:
        mapping[i] = 1  # may


def elif_chain(i: torch.Tensor) -> None:
    if _PLATFORM == "npu":
        mapping[i] = 1  # never
    elif _PLATFORM in ("cuda", "hip"):
        mapping[i] = 2  # may
    else:
        mapping[i] = 3  # never


def data_dependent(i: torch.Tensor) -> None:
    if not _is_npu and i.is_cuda:  # unknown: i is a local
        mapping[i] = 1  # may
    else:
        mapping[i] = 2  # may
    if _is_npu and i.is_cuda:  # False whatever i is
        mapping[i] = 3  # never


def early_return(i: torch.Tensor) -> None:
    if _is_cuda_alike:
        mapping[i] = 1  # may
        return
    mapping[i] = 2  # never


def shadowed(i: torch.Tensor, _is_npu: bool) -> None:
    if _is_npu:  # the parameter, not the module flag
        mapping[i] = 1  # may


def called(i: torch.Tensor) -> None:
    if is_npu():  # a call is never evaluated
        mapping[i] = 1  # may


def nested(i: torch.Tensor) -> None:
    for _ in range(2):
        with contextlib.suppress(IndexError):
            try:
                if sys.platform == "no-such-platform":
                    mapping[i] = 1  # never
                    continue
                mapping[i] = 2  # may
            except RuntimeError:
                if not _is_npu:
                    mapping[i] = 3  # may


def make_closure(flag: bool) -> Callable[[torch.Tensor], None]:
    def closure(i: torch.Tensor) -> None:
        if flag:
            mapping[i] = 1  # closure-true
        else:
            mapping[i] = 2  # closure-false

    return closure


@functools.cache
@functools.lru_cache(maxsize=4)
def decorated(i: Any) -> None:
    if torch.version.cuda == "no such version":  # an attribute of a module: read
        mapping[i] = 1  # never


def is_npu() -> bool:
    return False


def _marked(fn: Callable[..., Any], mark: str) -> list[int]:
    lines, start = inspect.getsourcelines(inspect.unwrap(fn))
    return [start + n for n, text in enumerate(lines) if text.rstrip().endswith(f"# {mark}")]


@pytest.mark.parametrize(
    "fn", [if_else, elif_chain, data_dependent, early_return, shadowed, called, nested]
)
def test_lines_ruled_out_only_by_flags(fn: Callable[..., Any]) -> None:
    may, never = _marked(fn, "may"), _marked(fn, "never")
    assert may or never
    assert all(may_run(fn, line) for line in may)
    assert not any(may_run(fn, line) for line in never)


def test_closure_cells_are_flags() -> None:
    on, off = make_closure(True), make_closure(False)
    (true_line,), (false_line,) = _marked(on, "closure-true"), _marked(on, "closure-false")
    assert may_run(on, true_line) and not may_run(on, false_line)
    assert may_run(off, false_line) and not may_run(off, true_line)


def test_decorated_function_is_found_by_its_first_decorator() -> None:
    (line,) = _marked(decorated, "never")
    assert not may_run(decorated, line)


def test_no_source_keeps_every_line() -> None:
    namespace: dict[str, Any] = {"_is_npu": False}
    exec(compile("def f():\n    if _is_npu:\n        return 1\n", "<no file>", "exec"), namespace)
    assert may_run(namespace["f"], 3)
    assert may_run(len, 1)  # no code object at all
