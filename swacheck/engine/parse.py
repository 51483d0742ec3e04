"""Turn a file's bytes into a libcst module, or into an SWA999 finding saying why not."""

from __future__ import annotations

import ast
import dataclasses
import re
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property

import libcst as cst
from libcst.metadata import MetadataWrapper

from swacheck.analysis.tree import TreeMaps
from swacheck.engine import limits
from swacheck.engine.decoding import Decoded, UndecodableSource, decode_source
from swacheck.engine.guards import Shape, shape_problem
from swacheck.engine.noqa import NONE, Suppressions, suppressions
from swacheck.engine.regions import Regions, blank_irrelevant_definitions
from swacheck.finding import PARSE_ERROR_CODE, Finding, Position


@dataclass(frozen=True)
class Parsed:
    wrapper: MetadataWrapper
    # The text parsed, as CPython decodes the file (``engine.decoding``), and how: an
    # edit of it is encoded back the same way (``Decoded.encode``).
    decoded: Decoded
    # Whether some definitions were blanked out before parsing (``engine.regions``).
    partial: bool = False
    # The file's suppression comments (read from its bytes, blanked parts included).
    noqa: Suppressions = NONE

    @property
    def text(self) -> str:
        """The text parsed, without a BOM."""
        return self.decoded.text

    @cached_property
    def maps(self) -> TreeMaps:
        """The tree's parents and positions, built once for both passes over it."""
        return TreeMaps(self.wrapper.module, self.text)


def _first_line_error(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


# CPython's own limit on bracket nesting; libcst's native parser overflows the C stack
# (killing the process) far below what it would need to report such a file itself.
MAX_BRACKET_DEPTH = 200
_TOO_DEEP = "source is nested too deeply to analyse"


def _too_deep(data: bytes) -> bool:
    """Whether CPython rejects ``data`` for its nesting (checked only where it could be)."""
    if sum(data.count(b) for b in (b"(", b"[", b"{")) <= MAX_BRACKET_DEPTH:
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(data)
    except SyntaxError as exc:
        return "too many nested" in str(exc.msg)
    except (RecursionError, MemoryError):
        return True
    except ValueError:
        return False
    return False


def _no_validation(node: cst.CSTNode) -> None:
    pass


@contextmanager
def _parser_trusted() -> Iterator[None]:
    """Skip libcst's per-node validation while its native parser builds a tree.

    Every node the parser makes runs ``CSTNode._validate`` (its ``__post_init__``),
    about a fifth of a parse, though the grammar the parser just applied already
    holds what it checks (libcst's own comment there: moving validation out of
    parsing is a performance to-do). The same tree comes out either way. The class's
    hook is swapped only while this is the process's only thread (a worker, the
    command line), so no other thread's hand-built nodes go unvalidated.
    """
    if threading.active_count() != 1:
        yield
        return
    validate = cst.CSTNode.__post_init__
    cst.CSTNode.__post_init__ = _no_validation  # type: ignore[method-assign]
    try:
        yield
    finally:
        cst.CSTNode.__post_init__ = validate  # type: ignore[method-assign]


class _ShapeRefused(Exception):
    """A shape libcst's native parser cannot take (:mod:`swacheck.engine.guards`)."""

    def __init__(self, shape: Shape) -> None:
        super().__init__(shape.reason)
        self.shape = shape


def nesting_finding(path: str) -> Finding:
    """SWA999 for a file too deeply nested to analyse."""
    return _parse_error(path, f"File could not be parsed ({_TOO_DEEP})", 1, 0, b"")


def _parse_error(path: str, message: str, row: int, column: int, data: bytes) -> Finding:
    # libcst may point past the end of a line or of the file: clamp to the file.
    lines = re.split(rb"\r\n|\r|\n", data) if data else [b""]
    row = min(max(row, 1), len(lines))
    column = min(max(column, 0), len(lines[row - 1]))
    position = Position(row, column)
    return Finding(
        code=PARSE_ERROR_CODE,
        message=message,
        path=path,
        start=position,
        end=position,
        noqa_row=None,
    )


def parse_source(
    path: str,
    data: bytes,
    *,
    nesting_checked: bool = False,
    shape_checked: bool = False,
    noqa: Suppressions | None = None,
) -> Parsed | Finding:
    """Parse ``data`` honouring its PEP 263 encoding; failures become an SWA999 finding.

    ``nesting_checked``: CPython's parser already accepted ``data`` (``engine.regions``);
    ``shape_checked``: the guards (``engine.guards``) passed ``data``, or the whole file
    it was cut from; ``noqa``: the suppressions to keep, when they are not ``data``'s own
    (those of the whole file, for ``data`` with definitions blanked out).
    """
    row, column = 1, 0
    try:
        if b"\x00" in data:
            row = data[: data.index(b"\x00")].count(b"\n") + 1
            raise ValueError("source contains a NUL byte")
        if not nesting_checked and _too_deep(data):
            raise RecursionError
        shape = None if shape_checked else shape_problem(data)
        if shape is not None:
            raise _ShapeRefused(shape)
        # Decoded here, as CPython decodes it: libcst's own detection refuses files
        # CPython compiles (a declared encoding in a file with CR-only line ends).
        decoded = decode_source(data)
        with _parser_trusted():
            module = cst.parse_module(decoded.text)
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        noqa = suppressions(decoded.text) if noqa is None else noqa
        return Parsed(wrapper, decoded, noqa=noqa)
    except cst.ParserSyntaxError as exc:
        row, column, reason = _syntax_error(decoded.text, exc)
    except UndecodableSource as exc:
        reason = f"cannot decode source: {_first_line_error(exc)}"
    except RecursionError:
        reason = _TOO_DEEP
    except _ShapeRefused as exc:
        row, reason = exc.shape
    except ValueError as exc:
        reason = f"cannot parse: {_first_line_error(exc)}"
    return _parse_error(path, f"File could not be parsed ({reason})", row, column, data)


def _syntax_error(text: str, exc: cst.ParserSyntaxError) -> tuple[int, int, str]:
    """Row, column and reason of a syntax error, as CPython reports it where it agrees
    that the file is invalid (libcst's own position can be lines off: ``def f(:`` on
    line 1 is "error at 2:4" there); libcst's where CPython accepts the file."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError as error:
        if error.lineno:
            column = max((error.offset or 1) - 1, 0)
            return error.lineno, column, f"syntax error: {error.msg}"
    except (ValueError, RecursionError, MemoryError):
        pass
    return exc.raw_line, exc.raw_column, f"syntax error: {exc.message}"


def too_large(path: str, data: bytes, limit: int) -> Finding | None:
    """SWA999 for a file over the ``max-file-size`` limit (0: none)."""
    if not limit or len(data) <= limit:
        return None
    return limits.too_large(path, len(data), limit)


def parse_regions(
    path: str, data: bytes, regions: Regions | None, max_size: int = 0
) -> Parsed | Finding:
    """Parse ``data`` with the definitions ``regions`` matches no trigger of blanked out
    (``engine.regions``), if that parses; else the whole file. A file over ``max_size``
    bytes (0: no limit) is not parsed at all, nor one of a shape the guards refuse:
    they look at the whole file before anything parses it, CPython's parser included
    (its tree of a 990 KB call takes 500 MB)."""
    oversized = too_large(path, data, max_size)
    if oversized is not None:
        return oversized
    shape = shape_problem(data)
    if shape is not None:
        row, reason = shape
        return _parse_error(path, f"File could not be parsed ({reason})", row, 0, data)
    if regions is not None:
        sparse = blank_irrelevant_definitions(data, regions)
        if sparse is not None:
            # CPython accepted the file: its nesting need not be checked again.
            if sparse is data:
                return parse_source(path, data, nesting_checked=True, shape_checked=True)
            # The suppressions are the whole file's (blanked definitions keep theirs),
            # read once: not also from the blanked text.
            noqa = suppressions(data)
            parsed = parse_source(path, sparse, nesting_checked=True, shape_checked=True, noqa=noqa)
            if not isinstance(parsed, Parsed):
                return parse_source(path, data, shape_checked=True)
            return dataclasses.replace(parsed, partial=True)
    return parse_source(path, data, shape_checked=True)
