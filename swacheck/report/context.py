"""What a format may need besides the findings: this run's style, the reported files'
text (snippets, fingerprints, absolute file names) and the rules' names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from swacheck.engine.texts import NO_TEXTS, FileTexts
from swacheck.report.style import PLAIN, Style


@dataclass(frozen=True)
class ReportContext:
    style: Style = PLAIN
    texts: FileTexts = NO_TEXTS
    # code -> rule name (``name`` in JSON, ``--statistics``).
    names: Mapping[str, str] = field(default_factory=dict)


PLAIN_CONTEXT = ReportContext()
