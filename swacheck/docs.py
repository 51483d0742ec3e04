"""A rule's documentation page, rendered from the rule class (one source of truth).

``swacheck rule CODE`` prints it; ``docs/rules/CODE.md`` is the same text, generated
by ``python -m swacheck.docs docs/rules`` and checked current by a test.
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
    parts = [f"# {rule.code} ({rule.name})", "", rule.summary, ""]
    if rule.invariant or rule.origin:
        parts += [f"Invariant: {rule.invariant}. Origin: {rule.origin}.", ""]
    parts += [rule.documentation(), ""]
    if rule.INVALID:
        bad = rule.INVALID[0]
        parts += ["## Example", "", "```python", bad.code.strip("\n"), "```", ""]
    if rule.VALID:
        good = rule.VALID[0]
        parts += ["Use instead:", "", "```python", good.code.strip("\n"), "```", ""]
    parts += ["## Fix safety", "", _FIX_SAFETY[rule.fix_safety], ""]
    keys = ", ".join(f"`{k}`" for k in rule.config_keys) or "none"
    parts += ["## Options", "", f"Configuration keys read (`[tool.swacheck]`): {keys}.", ""]
    return "\n".join(parts)


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
    for page in write_pages(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/rules")):
        print(page)
