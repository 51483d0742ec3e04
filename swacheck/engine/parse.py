"""Turn a file's bytes into a libcst module, or into an SWA999 finding saying why not."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper

from swacheck.engine.regions import blank_irrelevant_definitions
from swacheck.finding import PARSE_ERROR_CODE, Finding, Position
from swacheck.triggers import TriggerSet


@dataclass(frozen=True)
class Parsed:
    wrapper: MetadataWrapper
    text: str
    # Whether some definitions were blanked out before parsing (``engine.regions``).
    partial: bool = False


def _first_line_error(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def parse_source(path: str, data: bytes) -> Parsed | Finding:
    """Parse ``data`` honouring its PEP 263 encoding; failures become an SWA999 finding."""
    row, column = 1, 0
    try:
        if b"\x00" in data:
            row = data[: data.index(b"\x00")].count(b"\n") + 1
            raise ValueError("source contains a NUL byte")
        module = cst.parse_module(data)
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        # libcst round-trips byte for byte, so the decoded bytes are ``module.code``
        # without a second full code generation.
        text = data.decode(module.encoding)
        return Parsed(wrapper, text[1:] if text.startswith("\ufeff") else text)
    except cst.ParserSyntaxError as exc:
        row, column = exc.raw_line, exc.raw_column
        reason = f"syntax error: {exc.message}"
    except (UnicodeDecodeError, LookupError, SyntaxError) as exc:
        reason = f"cannot decode source: {_first_line_error(exc)}"
    except RecursionError:
        reason = "source is nested too deeply to analyse"
    except ValueError as exc:
        reason = f"cannot parse: {_first_line_error(exc)}"
    position = Position(max(row, 1), max(column, 0))
    return Finding(
        code=PARSE_ERROR_CODE,
        message=f"File could not be parsed ({reason})",
        path=path,
        start=position,
        end=position,
        noqa_row=None,
    )


def parse_regions(path: str, data: bytes, regions: TriggerSet | None) -> Parsed | Finding:
    """Parse ``data`` with the definitions ``regions`` matches no trigger of blanked out
    (``engine.regions``), if that parses; else the whole file."""
    if regions is not None:
        sparse = blank_irrelevant_definitions(data, regions)
        if sparse is not data:
            parsed = parse_source(path, sparse)
            if isinstance(parsed, Parsed):
                return dataclasses.replace(parsed, partial=True)
    return parse_source(path, data)
