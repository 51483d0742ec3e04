"""Documentation that agrees with the tool (issue 26, item 6): rule pages have one
source, the rule classes (their fix safety included); the examples' README lists what
the audit reports; every relative link of the docs leads somewhere."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from swacheck.docs import pages, render_rule, render_table
from swacheck.finding import Applicability
from swacheck.fix_safety import FixCase
from swacheck.rule import UndeclaredFix
from swacheck.rules import all_rules

REPO = Path(__file__).resolve().parents[2]


def test_rule_pages_are_current() -> None:
    for code, text in pages().items():
        page = REPO / "docs" / "rules" / f"{code}.md"
        assert page.read_text(encoding="utf-8") == text, (
            f"{page} is stale: run `python -m swacheck.docs`"
        )


def test_readme_rule_table_is_current() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert render_table() in readme, "README rule table is stale: run `python -m swacheck.docs`"


def test_summaries_read_alike() -> None:
    """``swacheck rules``, the pages, the README table and SARIF show each code's summary:
    each opens with a capital (or code) and ends without a full stop, as ruff's do."""
    from swacheck.engine.codes import ENGINE_CODES

    summaries = {r.code: r.summary for r in all_rules()} | {c.code: c.summary for c in ENGINE_CODES}
    for code, summary in summaries.items():
        assert summary[0].isupper() or summary[0] == "`", (code, summary)
        assert not summary.endswith("."), (code, summary)


def test_every_page_has_the_sections() -> None:
    for rule in all_rules():
        page = render_rule(rule)
        for section in ("## What it does", "## Why is this bad?", "## Example", "Use instead:"):
            assert section in page, (rule.code, section)
        assert "## Fix safety" in page and "## Options" in page


def test_a_page_says_what_the_rules_fixes_are() -> None:
    """The safety a page states is the one its fixes carry, case by case."""
    for rule in all_rules():
        section = render_rule(rule).split("## Fix safety", 1)[1].split("## Options")[0]
        kinds = {case.applicability for case in rule.fixes}
        if not kinds:
            assert "This rule has no autofix." in section, rule.code
            continue
        for kind in Applicability:
            mentioned = f"**{kind.value}** when" in section or f"fix is {kind.value}:" in section
            assert mentioned == (kind in kinds), (rule.code, kind)
        if len(kinds) == 1:
            assert "unsafe" not in section.split("\n\n", 2)[1] or Applicability.UNSAFE in kinds


def test_every_fix_a_rule_offers_in_its_examples_is_declared(tmp_path: Path) -> None:
    """The examples' findings carry only applicabilities their rule declares (the engine
    refuses any other: ``Rule.report`` raises, test_rule_examples.py sees the error)."""
    from swacheck.config import config_from_table
    from swacheck.engine.audit import AuditOptions, audit_sources

    seen: dict[str, set[Applicability]] = {}
    for rule in all_rules():
        for i, example in enumerate(rule.INVALID):
            options = AuditOptions(rules=[rule], config=config_from_table(dict(example.config)))
            root = tmp_path / f"{rule.code}-{i}"
            root.mkdir()
            files = {"example.py": example.code, **example.files}
            result = audit_sources(files, options, root=root)
            assert not result.errors, result.errors
            seen.setdefault(rule.code, set()).update(
                f.fix.applicability for f in result.findings if f.fix is not None
            )
    for rule in all_rules():
        assert seen.get(rule.code, set()) <= {case.applicability for case in rule.fixes}
    assert seen["SWA001"] and seen["SWA002"] == {Applicability.SAFE, Applicability.UNSAFE}


def test_an_undeclared_fix_is_refused() -> None:
    import libcst as cst

    from swacheck.finding import Fix
    from swacheck.rule import Rule

    class SafeOnly(Rule):
        code = "SWA998"
        name = "safe-only"
        summary = "declares a safe fix only"
        fixes = (FixCase(Applicability.SAFE),)

    rule = object.__new__(SafeOnly)
    with pytest.raises(UndeclaredFix, match="SWA998 offers a unsafe fix"):
        rule.report(cst.Name("x"), "m", fix=Fix("f", (), Applicability.UNSAFE))


def test_swa001_use_instead_is_its_example_corrected() -> None:
    (rule,) = [r for r in all_rules() if r.code == "SWA001"]
    page = render_rule(rule)
    example = page.split("## Example", 1)[1].split("Use instead:")[0]
    instead = page.split("Use instead:", 1)[1].split("## Fix safety")[0]
    assert "def free_swa" in example and "def free_swa" in instead
    assert "self.invalidate_loc_cache()" in instead.split("def free_swa")[1].split("def ")[0]


def test_the_examples_readme_lists_what_the_audit_reports(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "swacheck", "audit", "--no-cache", "--output-format", "json", "."],
        cwd=REPO / "examples",
        capture_output=True,
        text=True,
        timeout=300,
    )
    found = sorted(
        (Path(f["filename"]).name, f["location"]["row"], f["code"]) for f in json.loads(proc.stdout)
    )
    text = (REPO / "examples" / "README.md").read_text(encoding="utf-8")
    table = text.split("<!-- example-findings -->", 1)[1].split("<!-- /example-findings -->")[0]
    listed = sorted(
        (name, int(row), code)
        for name, row, code in re.findall(r"^\| `([\w.]+):(\d+)` \| (SWA\d+) \|", table, re.M)
    )
    assert listed == found


def test_relative_links_lead_somewhere() -> None:
    documents = [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "examples" / "README.md"]
    documents += sorted((REPO / "docs").glob("*.md"))
    for document in documents:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", document.read_text()):
            if "://" in target:
                continue
            assert (document.parent / target).exists(), (document.name, target)


def test_the_github_workflow_runs_real_commands() -> None:
    """examples/github-actions.yml parses, uploads SARIF to code scanning, and every
    swacheck command it runs is one the command line accepts."""
    import shlex

    yaml = pytest.importorskip("yaml")
    from swacheck.cli import _build_parser

    workflow = yaml.safe_load((REPO / "examples" / "github-actions.yml").read_text())
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    uses = [step.get("uses", "") for step in steps]
    assert any(u.startswith("github/codeql-action/upload-sarif@") for u in uses)
    audit = workflow["jobs"]["audit"]
    assert audit["permissions"]["security-events"] == "write"
    commands = [
        line.strip()
        for step in steps
        for line in step.get("run", "").splitlines()
        if line.strip().startswith("swacheck ")
    ]
    assert any("--output-format sarif" in c for c in commands)
    assert any("--output-format github" in c for c in commands)
    for command in commands:
        _build_parser().parse_args(shlex.split(command)[1:])
    pytest_runs = [step["run"] for step in steps if "pytest" in step.get("run", "")]
    assert any("--swa-sanitize=" in run for run in pytest_runs)
