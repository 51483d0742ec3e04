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


# -- facts the pages state that the tool knows (issue 40) ---------------------------------


def _codes_between(first: str, last: str) -> list[str]:
    """``SWA001``..``SWA011`` as the codes they span."""
    return [f"SWA{n:03d}" for n in range(int(first[3:]), int(last[3:]) + 1)]


def test_the_readme_introduction_names_every_code() -> None:
    from swacheck.engine.codes import ENGINE_CODES

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    intro = readme.split("## Quick start", 1)[0]
    (span,) = re.findall(r"rules `(SWA\d{3})`–`(SWA\d{3})`", intro)
    assert _codes_between(*span) == [rule.code for rule in all_rules()]
    for code in ENGINE_CODES:
        assert f"`{code.code}`" in intro, code.code


def test_the_docs_index_names_every_rule_page() -> None:
    index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    (row,) = [line for line in index.splitlines() if line.startswith("| [rules/](rules/)")]
    (first, last), *_ = re.findall(r"`(SWA\d{3})\.md` … `(SWA\d{3})\.md`", row)
    named = set(_codes_between(first, last)) | set(re.findall(r"`(SWA\d{3})\.md`", row))
    assert named == {page.stem for page in (REPO / "docs" / "rules").glob("*.md")}


def test_the_docs_index_names_the_invariants_design_defines() -> None:
    design = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    defined = [int(n) for n in re.findall(r"^\| I(\d+) \|", design, re.M)]
    assert defined == list(range(1, len(defined) + 1))
    index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    (span,) = re.findall(r"the invariants I(\d+)–I(\d+)", index)
    assert [int(n) for n in span] == [1, len(defined)]
    for rule in all_rules():  # every rule's invariant is one design.md defines
        assert int(rule.invariant[1:]) in defined, rule.code


def test_reliability_counts_the_tests_it_collects() -> None:
    page = (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")
    (stated,) = re.findall(r"`tests/reliability/`,\s+collected by [^:]*: (\d+) tests", page)
    collect = ("--collect-only", "-q", "-p", "no:cacheprovider")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *collect, "tests/reliability"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (collected,) = re.findall(r"^(\d+) tests? collected", proc.stdout, re.M)
    assert int(stated) == int(collected), proc.stdout[-500:]


def test_the_quick_start_demo_reports_what_the_readme_says() -> None:
    """Step 3's command, run as written (with ``--json``), reports exactly the violation
    kinds the paragraph after it names."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    step = readme.split("**3. A first sanitized run.**", 1)[1].split("**4. ", 1)[0]
    command = next(line for line in step.splitlines() if line.startswith("swacheck demo "))
    after = step.split(command, 1)[1].split("```\n", 1)[1].split("\n\n", 1)[0]
    proc = subprocess.run(
        [sys.executable, "-m", "swacheck", *command.split()[1:], "--json", "--quiet"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    violations = json.loads(proc.stdout.strip().splitlines()[-1])["violations"]
    named = {word for word in re.findall(r"`([a-z-]+)`", after) if word in violations}
    assert named == {kind for kind, count in violations.items() if count}


def test_the_readme_names_the_wheels_the_engine_tests_download() -> None:
    engines = REPO / "tests" / "engines"
    fetched: set[str] = set()
    for source in engines.glob("*.py"):
        text = source.read_text(encoding="utf-8")
        fetched.update(
            re.findall(r"(?:extracted|_release|wheel)\(\"([\d.]+(?:post\d+)?)\"\)", text)
        )
        for releases in re.findall(r"^RELEASES = \(([^)]*)\)", text, re.M):
            fetched.update(re.findall(r"\"([\d.]+(?:post\d+)?)\"", releases))
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    paragraph = readme.split("<!-- engine-wheels -->\n", 1)[1].split("\n\n", 1)[0]
    count = {"six": 6, "seven": 7, "eight": 8}[re.findall(r"downloads (\w+) release", paragraph)[0]]
    listed = set(re.findall(r"\b0\.\d+\.\d+(?:\.post\d+)?\b", paragraph.split(";")[0]))
    assert listed == fetched and count == len(fetched)
    wheels = (engines / "sglang_wheels.py").read_text(encoding="utf-8")
    assert '"SWACHECK_ENGINES"' in wheels and '".cache" / "swacheck" / "engines"' in wheels
    assert "`~/.cache/swacheck/engines` (or `$SWACHECK_ENGINES`)" in paragraph


def test_pyproject_points_to_readme_sections_that_exist() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^#+ (.+)$", readme, re.M))
    headings |= set(re.findall(r"^\*\*(?:\d+\. )?([^*]+?)\.?\*\*", readme, re.M))
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    cited = re.findall(r"README(?::|'s) \"([^\"]+)\"", pyproject)
    assert cited
    for section in cited:
        assert section in headings, section


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_anchors_lead_to_headings() -> None:
    """A link to ``#anchor`` (in its page or another) names a heading GitHub makes that
    anchor of, or an explicit ``<a id>`` (a bold lead-in is no heading)."""
    documents = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    anchors = {
        d.resolve(): {_slug(h) for h in re.findall(r"^#+ (.+)$", d.read_text(), re.M)}
        | set(re.findall(r'<a id="([^"]+)"></a>', d.read_text()))
        for d in documents
    }
    for document in documents:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", document.read_text()):
            page = (document.parent / target).resolve() if target else document.resolve()
            if page in anchors:
                assert anchor in anchors[page], (document.name, target, anchor)


# A record's label in docs/real-world.md: the day, the commit it measured, and whether it
# is current (``*Record of 2026-11-27, main at 620db6d: current.*``).
RECORD = re.compile(
    r"^\*Record of (?P<day>\d{4}-\d{2}-\d{2}), [^*]*? at (?P<commit>[0-9a-f]{7,40}): "
    r"(?P<status>current|superseded)\b",
    re.M,
)


def _tables(text: str) -> list[tuple[str, list[list[str]]]]:
    """Each table of a page, with the text before it since the previous table."""
    found, before, rows = [], [], []
    for line in text.splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
            continue
        if rows:
            found.append(("\n".join(before), rows))
            before, rows = [], []
        before.append(line)
    if rows:
        found.append(("\n".join(before), rows))
    return found


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=REPO, capture_output=True, text=True, check=False
    ).stdout.strip()


def test_every_real_world_table_says_when_what_and_whether_current() -> None:
    """Each table is labelled with the day it was measured and the commit it measured
    (which exists, and is no younger than the record), current or superseded; a
    current table of findings has a column for every rule, and the current precision
    table counts what the current findings table holds."""
    import shutil

    rules = [rule.code for rule in all_rules()]
    text = (REPO / "docs" / "real-world.md").read_text(encoding="utf-8")
    history = shutil.which("git") is not None and _git("rev-parse", "--is-shallow-repository")
    current: dict[str, list[list[str]]] = {}
    for before, rows in _tables(text):
        labels = list(RECORD.finditer(before))
        assert len(labels) == 1, (before[-300:], rows[0])
        label = labels[0]
        if history == "false":
            day = _git("show", "-s", "--format=%cs", f"{label['commit']}^{{commit}}")
            assert day and day <= label["day"], (label["commit"], day, label["day"])
        header = rows[0]
        codes = [cell for cell in header if re.fullmatch(r"SWA\d{3}", cell)]
        if label["status"] == "current" and codes:
            assert codes == rules, header
            current["findings"] = rows
        if label["status"] == "current" and header[:2] == ["rule", "findings"]:
            assert [row[0] for row in rows[2:]] == rules
            current["precision"] = rows
    findings, precision = current["findings"], current["precision"]
    column = {cell: i for i, cell in enumerate(findings[0])}
    for row in precision[2:]:
        total = sum(int(target[column[row[0]]]) for target in findings[2:])
        assert int(row[1]) == total, row
