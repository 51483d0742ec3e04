"""The engine's own codes: findings about files and comments rather than about SWA code.

``SWA999`` (a file that cannot be analysed) and ``SWA100`` (an unused ``# noqa``) come
from the engine, not from a rule module, but are selected, ignored, counted, listed
and explained like rules: ``swacheck rule SWA999`` prints the page below.
"""

from __future__ import annotations

from dataclasses import dataclass

from swacheck.finding import PARSE_ERROR_CODE, UNUSED_NOQA_CODE
from swacheck.fix_safety import FixCase, safe_fix


@dataclass(frozen=True)
class EngineCode:
    code: str
    name: str
    summary: str
    # ruff's wording for ``rules --output-format json``.
    fix: str
    # Reported unless deselected (``True``), or only when selected explicitly.
    default: bool
    documentation: str
    # Each case of its fix (``swacheck.fix_safety``); the page's "Fix safety" opens with them.
    fixes: tuple[FixCase, ...] = ()


CANNOT_ANALYSE = EngineCode(
    code=PARSE_ERROR_CODE,
    name="cannot-analyse",
    summary="The file could not be read, decoded, parsed or analysed within the limits",
    fix="Fix is not available.",
    default=True,
    documentation="""
## What it does
Reports a file swacheck could not analyse, with the reason: it does not exist (a path
given on the command line), it cannot be read, its bytes do not decode in its declared
encoding, it holds a NUL byte or a syntax error, it is nested too deeply (brackets), it
has a shape libcst's native parser cannot take (a chain of more than 200 links or
operators in a row, a literal or call of more than 50,000 elements), it crashed the
parser, or it is beyond the per-file limits (`max-file-size` bytes, `max-file-time` CPU
seconds per pass, `max-file-memory` MiB).

## Why is this bad?
No rule can check a file that is not analysed, so a bug in it would go unreported. The
audit goes on with every other file.

Reported only for files some enabled rule could fire in, so that `--no-prefilter` gives
the same findings; a path that does not exist or cannot be read is always reported.

## Fix safety
Correct the file, the path, or the limits.
""",
)

UNUSED_NOQA = EngineCode(
    code=UNUSED_NOQA_CODE,
    name="unused-noqa",
    summary="A `# noqa` names an SWA code that suppresses nothing on its line",
    fix="Fix is always available.",
    default=False,
    documentation="""
## What it does
Reports a `# noqa: SWA...` comment naming a code whose rule ran on the file and found
nothing on that line, or a code swacheck does not have (ruff's RUF100, for swacheck's
codes only: bare `# noqa` comments and other tools' codes are left alone).

Off unless selected: `--extend-select SWA100` (or `select`/`extend-select` in
`[tool.swacheck]`).

## Why is this bad?
A stale suppression hides the next real finding on that line.

## Fix safety
The fix removes the unused codes, or the whole comment when none is left.
""",
    fixes=(safe_fix(),),
)

ENGINE_CODES: tuple[EngineCode, ...] = (UNUSED_NOQA, CANNOT_ANALYSE)


def engine_code(code: str) -> EngineCode | None:
    return next((c for c in ENGINE_CODES if c.code == code.upper()), None)
