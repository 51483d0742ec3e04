"""What a method does with its own object's attributes, read from its bytecode.

The sanitizer decides some things about a class before any call is made: whether its
translate method memoises (it assigns to ``self``), which attributes cache a
translation (a method assigns one while calling translate), which methods read such an
attribute, and, when a mapping write was not followed by an invalidation, on which
lines the methods involved write the mapping (``branches`` keeps those that can run).
The source may be missing or differ from
what runs; the code object is what runs. Only ``self.NAME`` accesses count (the first
parameter's attributes), so a local of the same name is never taken for one.

Bytecode differs between Python versions; what is read here is stable from 3.10 to
3.13: an attribute load is ``LOAD_ATTR``/``LOAD_METHOD`` after a load of ``self``, a
store is ``STORE_ATTR`` after it, an item store is ``STORE_SUBSCR``.
"""

from __future__ import annotations

import dis
import functools
import inspect
import linecache
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

_LOADS = ("LOAD_ATTR", "LOAD_METHOD")
# Opcodes of a function that does nothing (a docstring and ``pass``).
_TRIVIAL = frozenset(
    ("RESUME", "NOP", "LOAD_CONST", "RETURN_CONST", "RETURN_VALUE", "POP_TOP", "CACHE")
)


@dataclass(frozen=True)
class SelfAccess:
    """The attributes of ``self`` one function loads and stores, with their lines; the
    lines that store into an item of an attribute or call an in-place method on it."""

    loads: frozenset[str] = frozenset()
    stores: frozenset[str] = frozenset()
    # attribute -> lines where it (or a view of it) is written: ``self.a[i] = x``,
    # ``self.a.fill_(0)``, ``self.a[:-1].zero_()``, ``self.a = x``.
    writes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # The same for an attribute of any object (``self.pool.a[i] = x``).
    any_writes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # attribute of ``self`` -> lines where it is loaded (``self.helper(...)`` calls it there).
    load_lines: dict[str, tuple[int, ...]] = field(default_factory=dict)


def _code(fn: Any) -> CodeType | None:
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    return getattr(fn, "__code__", None)


def _loads_self(ins: dis.Instruction, self_name: str) -> bool:
    if not ins.opname.startswith("LOAD_FAST"):
        return False
    value = ins.argval
    return value == self_name or (isinstance(value, tuple) and value[-1:] == (self_name,))


@functools.lru_cache(maxsize=4096)
def _access(code: CodeType) -> SelfAccess:
    if code.co_argcount == 0:
        return SelfAccess()
    self_name = code.co_varnames[0]
    loads: dict[str, set[int]] = {}
    stores: set[str] = set()
    writes: dict[str, set[int]] = {}
    any_writes: dict[str, set[int]] = {}
    # Per line: the attributes loaded on it (of self, of anything), and whether it stores
    # into an item or calls an in-place (``*_``) method.
    by_line: dict[int, set[str]] = {}
    any_by_line: dict[int, set[str]] = {}
    mutating: set[int] = set()
    previous: dis.Instruction | None = None
    line = code.co_firstlineno
    for ins in dis.get_instructions(code):
        positions = getattr(ins, "positions", None)  # 3.11+; 3.10 has starts_line only
        lineno = positions.lineno if positions is not None else ins.starts_line
        if lineno:
            line = lineno
        after_self = previous is not None and _loads_self(previous, self_name)
        name = ins.argval if isinstance(ins.argval, str) else None
        if ins.opname in _LOADS and name is not None:
            any_by_line.setdefault(line, set()).add(name)
            if after_self:
                loads.setdefault(name, set()).add(line)
                by_line.setdefault(line, set()).add(name)
            elif name.endswith("_") and not name.endswith("__"):
                mutating.add(line)
        elif ins.opname == "STORE_ATTR" and name is not None:
            any_writes.setdefault(name, set()).add(line)
            if after_self:
                stores.add(name)
                writes.setdefault(name, set()).add(line)
        elif ins.opname == "STORE_SUBSCR":
            mutating.add(line)
        previous = ins
    for line in mutating:
        for name in by_line.get(line, ()):
            writes.setdefault(name, set()).add(line)
        for name in any_by_line.get(line, ()):
            any_writes.setdefault(name, set()).add(line)
    return SelfAccess(
        frozenset(loads),
        frozenset(stores),
        {name: tuple(sorted(lines)) for name, lines in writes.items()},
        {name: tuple(sorted(lines)) for name, lines in any_writes.items()},
        {name: tuple(sorted(lines)) for name, lines in loads.items()},
    )


def self_access(fn: Callable[..., Any]) -> SelfAccess:
    """What ``fn`` (a function or method, wrappers looked through) does with ``self``."""
    code = _code(fn)
    return SelfAccess() if code is None else _access(code)


def is_trivial(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` does nothing (``pass``, a docstring): a base class's no-op."""
    code = _code(fn)
    if code is None:
        return False
    return all(ins.opname in _TRIVIAL for ins in dis.get_instructions(code))


def class_functions(cls: type) -> Iterator[tuple[str, Callable[..., Any]]]:
    """``(name, function)`` for every plain function the class (and its bases, the nearest
    definition first) defines, private ones included."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        for name, value in vars(klass).items():
            if name in seen:
                continue
            seen.add(name)
            if inspect.isfunction(value):
                yield name, value


def source_line(fn: Callable[..., Any], line: int) -> str:
    """``path:line in function: `text``` for a line of ``fn``'s file."""
    code = _code(fn)
    if code is None:
        return f"line {line}"
    text = linecache.getline(code.co_filename, line).strip()
    return f"{code.co_filename}:{line} in {code.co_name}" + (f": `{text}`" if text else "")


def definition(fn: Callable[..., Any]) -> str:
    """``path:line in function`` of ``fn``'s definition."""
    code = _code(fn)
    if code is None:
        return getattr(fn, "__qualname__", "?")
    return f"{code.co_filename}:{code.co_firstlineno} in {code.co_name}"
