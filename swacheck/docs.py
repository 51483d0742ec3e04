"""A rule's documentation page, rendered from the rule class (one source of truth).

``swacheck rule CODE`` prints it; ``docs/rules/CODE.md`` (the engine's codes too) and the
README's rule table are generated from the same classes by ``python -m swacheck.docs``
(run in the repo root) and checked current by a test. The "Fix safety" section opens
with what the rule's ``fixes`` declare (:mod:`swacheck.fix_safety`), so the page cannot
disagree with what ``--fix`` does.
"""

from __future__ import annotations

import sys
from pathlib import Path

from swacheck.engine.codes import ENGINE_CODES, EngineCode
from swacheck.fix_safety import describe, safety
from swacheck.rule import Rule


def _fix_section(cases_text: str, notes: str) -> list[str]:
    parts = ["## Fix safety", "", cases_text, ""]
    if notes.strip():
        parts += [notes.strip(), ""]
    return parts


def render_rule(rule: type[Rule]) -> str:
    """The page, in ruff's order: what, why, example, fix safety, options.

    The example is the first ``INVALID`` case; "Use instead" is its fixed version where
    the rule fixes it (the same code, corrected), else the first ``VALID`` case.
    """
    body, _, fix_notes = rule.documentation().partition("## Fix safety")
    parts = [f"# {rule.code} ({rule.name})", "", rule.summary, ""]
    if rule.invariant or rule.origin:
        parts += [f"Invariant: {rule.invariant}. Origin: {rule.origin}.", ""]
    parts += [body.strip(), ""]
    if rule.INVALID:
        bad = rule.INVALID[0]
        parts += ["## Example", "", "```python", bad.code.strip("\n"), "```", ""]
        good = bad.fixed if bad.fixed is not None else rule.VALID[0].code if rule.VALID else None
        if good is not None:
            parts += ["Use instead:", "", "```python", good.strip("\n"), "```", ""]
    parts += _fix_section(describe(rule.fixes), fix_notes)
    keys = ", ".join(f"`{k}`" for k in rule.config_keys) or "none"
    parts += ["## Options", "", f"Configuration keys read (`[tool.swacheck]`): {keys}.", ""]
    return "\n".join(parts)


def render_engine_code(code: EngineCode) -> str:
    """An engine code's page (``SWA999``, ``SWA100``), its fix safety generated likewise."""
    body, _, fix_notes = code.documentation.strip().partition("## Fix safety")
    parts = [f"# {code.code} ({code.name})", "", code.summary, "", body.strip(), ""]
    parts += _fix_section(describe(code.fixes), fix_notes)
    return "\n".join(parts)


def page_of(code: str) -> str | None:
    """``swacheck rule CODE``'s text, for a rule or an engine code; ``None`` if unknown."""
    from swacheck.engine.codes import engine_code
    from swacheck.rules import rule_by_code

    engine = engine_code(code)
    if engine is not None:
        return render_engine_code(engine)
    rule = rule_by_code(code)
    return render_rule(rule) if rule is not None else None


def render_table() -> str:
    """The README's rule table (between its ``rules-table`` markers)."""
    from swacheck.rules import all_rules

    rows = ["| code | name | what it flags | fix |", "| --- | --- | --- | --- |"]
    for rule in all_rules():
        fix = safety(rule.fixes).replace("none", "—").replace("/", " / ")
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


def pages() -> dict[str, str]:
    """Every code's page by code: the rules' and the engine's."""
    from swacheck.rules import all_rules

    found = {rule.code: render_rule(rule) for rule in all_rules()}
    found.update((code.code, render_engine_code(code)) for code in ENGINE_CODES)
    return found


def write_pages(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for code, page in sorted(pages().items()):
        path = folder / f"{code}.md"
        path.write_text(page, encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
    write_pages(root / "docs" / "rules")
    update_readme(root / "README.md")
