"""Turn findings into each output format. One module per format, one place that picks.

``full`` (the default, as ruff's) and ``concise`` are for people and are followed by
the closing summary; the others are documents for a program, printed whole and alone.
A format's module is imported when it is asked for: a pre-commit call pays for one
(JUnit's XML escaping alone compiled a regular expression costing ~15 ms at start-up).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

from swacheck.finding import Finding
from swacheck.report.context import ReportContext

Renderer = Callable[[Sequence[Finding], ReportContext], str]

# Format name -> (module under swacheck.report, renderer function).
FORMATS: dict[str, tuple[str, str]] = {
    "full": ("full", "render"),
    "concise": ("concise", "render"),
    "json": ("json_format", "render"),
    "json-lines": ("json_format", "render_lines"),
    "sarif": ("sarif", "render"),
    "github": ("github", "render"),
    "gitlab": ("gitlab", "render"),
    "junit": ("junit", "render"),
    "pylint": ("pylint", "render"),
    "grouped": ("grouped", "render"),
    "azure": ("azure", "render"),
    "rdjson": ("rdjson", "render"),
}
DEFAULT_FORMAT = "full"
# Formats for people: coloured on a terminal, followed by the summary.
HUMAN_FORMATS = frozenset({"full", "concise", "grouped"})


def renderer(name: str) -> Renderer:
    """The renderer of format ``name`` (one of :data:`FORMATS`)."""
    module, function = FORMATS[name]
    found: Renderer = getattr(importlib.import_module(f"{__name__}.{module}"), function)
    return found
