"""Where each code's documentation page lives (the ``url`` of JSON and SARIF output)."""

from __future__ import annotations

DOCS_BASE = "https://github.com/swacheck/swacheck/blob/main/docs/rules"


def rule_url(code: str) -> str:
    return f"{DOCS_BASE}/{code}.md"
