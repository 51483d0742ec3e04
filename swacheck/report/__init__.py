"""Turn findings into each output format. One module per format, one place that picks.

``full`` (the default, as ruff's) and ``concise`` are for people and are followed by
the closing summary; the others are documents for a program, printed whole and alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from swacheck.finding import Finding
from swacheck.report import concise, full, github, gitlab, json_format, junit, pylint, sarif
from swacheck.report.context import ReportContext

Renderer = Callable[[Sequence[Finding], ReportContext], str]

FORMATS: dict[str, Renderer] = {
    "full": full.render,
    "concise": concise.render,
    "json": json_format.render,
    "json-lines": json_format.render_lines,
    "sarif": sarif.render,
    "github": github.render,
    "gitlab": gitlab.render,
    "junit": junit.render,
    "pylint": pylint.render,
}
DEFAULT_FORMAT = "full"
# Formats for people: coloured on a terminal, followed by the summary.
HUMAN_FORMATS = frozenset({"full", "concise"})
