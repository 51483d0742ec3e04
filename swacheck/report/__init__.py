"""Turn findings into each output format. One module per format, one place that picks."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from swacheck.finding import Finding
from swacheck.report import github, json_format, sarif, text

Renderer = Callable[[Sequence[Finding]], str]

FORMATS: dict[str, Renderer] = {
    "text": text.render,
    "json": json_format.render,
    "sarif": sarif.render,
    "github": github.render,
}
