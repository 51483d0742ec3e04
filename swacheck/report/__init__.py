"""Turn findings into each output format. One module per format, one place that picks."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from swacheck.finding import Finding
from swacheck.report import github, json_format, sarif, text
from swacheck.report.style import Style

# Findings and how to show them (text uses the style; the machine formats ignore it).
Renderer = Callable[[Sequence[Finding], Style], str]

FORMATS: dict[str, Renderer] = {
    "text": text.render,
    "json": json_format.render,
    "sarif": sarif.render,
    "github": github.render,
}
