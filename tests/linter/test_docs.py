"""Rule documentation has one source: the rule classes. The generated files must match."""

from __future__ import annotations

from pathlib import Path

from swacheck.docs import render_rule, render_table
from swacheck.rules import all_rules

REPO = Path(__file__).resolve().parents[2]


def test_rule_pages_are_current() -> None:
    for rule in all_rules():
        page = REPO / "docs" / "rules" / f"{rule.code}.md"
        assert page.read_text(encoding="utf-8") == render_rule(rule), (
            f"{page} is stale: run `python -m swacheck.docs`"
        )


def test_readme_rule_table_is_current() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert render_table() in readme, "README rule table is stale: run `python -m swacheck.docs`"


def test_every_page_has_the_sections() -> None:
    for rule in all_rules():
        page = render_rule(rule)
        for section in ("## What it does", "## Why is this bad?", "## Example", "Use instead:"):
            assert section in page, (rule.code, section)
        assert "## Fix safety" in page and "## Options" in page
