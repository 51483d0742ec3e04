"""A rule's documentation page, rendered from the rule class (one source of truth).

``swacheck rule CODE`` prints it; ``docs/rules/CODE.md`` and the README's rule table
are generated from the same classes by ``python -m swacheck.docs`` (run in the repo
root) and checked current by a test.
"""

from __future__ import annotations

import sys
from pathlib import Path

from swacheck.rule import FixSafety, Rule

_FIX_SAFETY = {
    FixSafety.NONE: "This rule has no autofix.",
    FixSafety.SAFE: "The fix is safe: `swacheck audit --fix` applies it.",
    FixSafety.UNSAFE: (
        "The fix is unsafe: it is applied only with `--fix --unsafe-fixes`; review the result."
    ),
}


def render_rule(rule: type[Rule]) -> str:
    """The page, in ruff's order: what, why, example, fix safety, options."""
    body, _, fix_notes = rule.documentation().partition("## Fix safety")
    parts = [f"# {rule.code} ({rule.name})", "", rule.summary, ""]
    if rule.invariant or rule.origin:
        parts += [f"Invariant: {rule.invariant}. Origin: {rule.origin}.", ""]
    parts += [body.strip(), ""]
    if rule.INVALID:
        bad = rule.INVALID[0]
        parts += ["## Example", "", "```python", bad.code.strip("\n"), "```", ""]
    if rule.VALID:
        good = rule.VALID[0]
        parts += ["Use instead:", "", "```python", good.code.strip("\n"), "```", ""]
    parts += ["## Fix safety", "", _FIX_SAFETY[rule.fix_safety], ""]
    if fix_notes.strip():
        parts += [fix_notes.strip(), ""]
    keys = ", ".join(f"`{k}`" for k in rule.config_keys) or "none"
    parts += ["## Options", "", f"Configuration keys read (`[tool.swacheck]`): {keys}.", ""]
    return "\n".join(parts)


def render_table() -> str:
    """The README's rule table (between its ``rules-table`` markers)."""
    from swacheck.rules import all_rules

    rows = ["| code | name | what it flags | fix |", "| --- | --- | --- | --- |"]
    for rule in all_rules():
        fix = "—" if rule.fix_safety is FixSafety.NONE else rule.fix_safety.value
        rows.append(
            f"| [{rule.code}](docs/rules/{rule.code}.md) | {rule.name} | {rule.summary} | {fix} |"
        )
    return "\n".join(rows) + "\n"


def update_readme(readme: Path) -> None:
    text = readme.read_text(encoding="utf-8")
    start, end = "<!-- rules-table -->\n", "<!-- /rules-table -->"
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    readme.write_text(f"{head}{start}{render_table()}{end}{tail}", encoding="utf-8")


def write_pages(folder: Path) -> list[Path]:
    from swacheck.rules import all_rules

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for rule in all_rules():
        page = folder / f"{rule.code}.md"
        page.write_text(render_rule(rule), encoding="utf-8")
        written.append(page)
    return written


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
    write_pages(root / "docs" / "rules")
    update_readme(root / "README.md")
