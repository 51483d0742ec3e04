"""The output formats as ruff users expect them (issue 26, item 4), through the real
``swacheck`` command on the bundled examples: ``full`` (the default), ``concise``,
``json`` and ``json-lines`` field for field against ruff's own output, ``gitlab`` and
``junit`` validated against their consumers' schemas, ``pylint``, ``github``, and the
options around them (``--no-color``, ``check``, ``rule --all``, ``--statistics``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
EXAMPLES = REPO / "examples"


def run(
    cwd: Path, *args: str, rc: int | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NO_COLOR", "FORCE_COLOR", "SWACHECK_OUTPUT_FORMAT", "CI_PROJECT_DIR")
    }
    proc = subprocess.run(
        [sys.executable, "-m", "swacheck", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**environ, **(env or {})},
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    if rc is not None:
        assert proc.returncode == rc, (proc.returncode, proc.stdout, proc.stderr)
    return proc


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("formats") / "examples"
    shutil.copytree(EXAMPLES, folder, ignore=shutil.ignore_patterns("*.md", "__pycache__"))
    return folder


@pytest.fixture(scope="module")
def findings(examples: Path) -> list[dict[str, Any]]:
    return json.loads(run(examples, "audit", "--output-format", "json", rc=1).stdout)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


# -- full, the default ----------------------------------------------------------------


def test_full_is_the_default_with_snippets_and_carets(
    examples: Path, findings: list[dict[str, Any]]
) -> None:
    out = run(examples, "audit", rc=1).stdout
    assert out == run(examples, "audit", "--output-format", "full", rc=1).stdout
    blocks = out.split("\n\n")
    appl = [f["fix"]["applicability"] for f in findings if f["fix"]]
    assert out.endswith(
        f"Found {len(findings)} findings.\n"
        f"[*] {appl.count('safe')} fixable with `--fix` ({appl.count('unsafe')} unsafe fix "
        "available with `--fix --unsafe-fixes`).\n"
    )
    for finding in findings:
        name = Path(finding["filename"]).name
        row, column = finding["location"]["row"], finding["location"]["column"]
        where = f"--> {name}:{row}:{column}"
        (block,) = [b for b in blocks if where in b and finding["code"] in b.splitlines()[0]]
        header, arrow, *snippet = block.splitlines()
        assert header.startswith(finding["code"] + " ") and finding["message"] in header
        assert arrow.strip() == where
        source = _lines(examples / name)
        # The flagged row is shown as `row | text`, and (single-row spans) carets under
        # exactly the flagged columns.
        shown = [line for line in snippet if re.match(rf"\s*{row} \|", line)]
        assert shown and shown[0].split("|", 1)[1].strip() == source[row - 1].strip()
        if finding["end_location"]["row"] == row:
            carets = snippet[snippet.index(shown[0]) + 1]
            bar = carets.index("|")
            start = carets.index("^") - bar - 2
            width = carets.count("^")
            assert start == column - 1
            assert width == finding["end_location"]["column"] - column
        if finding["fix"]:
            assert f"help: {finding['fix']['message']}" in block
        unsafe = finding["fix"] and finding["fix"]["applicability"] == "unsafe"
        assert ("note: This is an unsafe fix" in block) == bool(unsafe)
        assert ("[*]" in header) == bool(finding["fix"] and not unsafe)


def test_full_draws_a_multi_row_span_as_ruff_does(examples: Path) -> None:
    out = run(examples, "audit", rc=1).stdout
    block = next(b for b in out.split("\n\n") if b.startswith("SWA007"))
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("22 |"))
    # Starts mid-row: an underline up to its first column, then `|` down to its end.
    underline = lines[start + 1]
    assert underline.endswith("_^") and underline.split("|", 1)[1].startswith("  _")
    # `NN | ` then two columns for the span's bar: the caret sits on column 45 (22:45).
    assert underline.index("^") - underline.index("|") - 2 - 2 == 45 - 1
    assert lines[start + 2].startswith("23 | |") and lines[start + 3].startswith("24 | |")
    assert re.fullmatch(r"\s+\| \|_+\^", lines[start + 4])


def test_full_shows_the_fix_as_a_change(examples: Path) -> None:
    out = run(examples, "audit", "cuda_graph_runner.py", rc=1).stdout
    block = next(b for b in out.split("\n\n") if b.startswith("SWA003"))
    assert "35 +             if self.out_cache_loc_swa is not None:" in block
    assert "36 +                 self.out_cache_loc_swa.zero_()" in block
    block = next(b for b in out.split("\n\n") if b.startswith("SWA002"))
    assert "   -             torch.zeros((max_num_token,), dtype=torch.int64)" in block
    assert "20 +             torch.zeros((max_num_token,), dtype=torch.int32)" in block


def test_an_environment_variable_picks_the_default_format(examples: Path) -> None:
    env = {"SWACHECK_OUTPUT_FORMAT": "concise"}
    concise = run(examples, "audit", rc=1, env=env).stdout
    assert concise.startswith("cuda_graph_runner.py:20:49: SWA002 [*] ")
    # The option wins over the variable; a wrong value is a usage error naming it.
    assert run(examples, "audit", "--output-format", "pylint", rc=1, env=env).stdout.startswith(
        "cuda_graph_runner.py:20: [SWA002] "
    )
    bad = run(examples, "audit", rc=2, env={"SWACHECK_OUTPUT_FORMAT": "text"})
    assert "SWACHECK_OUTPUT_FORMAT='text' is not an output format" in bad.stderr


def test_no_color_beats_force_color(examples: Path) -> None:
    forced = run(examples, "audit", rc=1, env={"FORCE_COLOR": "1"}).stdout
    assert "\x1b[" in forced
    plain = run(examples, "audit", "--no-color", rc=1, env={"FORCE_COLOR": "1"}).stdout
    assert "\x1b[" not in plain
    assert plain == run(examples, "audit", rc=1).stdout


def test_check_is_audit(examples: Path) -> None:
    assert (
        run(examples, "check", "--output-format", "concise", rc=1).stdout
        == run(examples, "audit", "--output-format", "concise", rc=1).stdout
    )


# -- ruff's JSON, field for field -----------------------------------------------------


def _shape(value: Any) -> Any:
    """The keys (recursively) and value types of a JSON value."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return type(value).__name__


@pytest.fixture(scope="module")
def ruffs(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """ruff's own JSON for a finding with a fix (ruff is in the test extra)."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff not installed")
    folder = tmp_path_factory.mktemp("ruff")
    (folder / "t.py").write_text("import os\n")
    proc = subprocess.run(
        [ruff, "check", "--isolated", "--no-cache", "--select", "F401", "--output-format", "json"],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    return json.loads(proc.stdout)


def test_json_has_ruffs_fields_in_ruffs_order(
    findings: list[dict[str, Any]], ruffs: list[dict[str, Any]], examples: Path
) -> None:
    with_fix = next(f for f in findings if f["fix"])
    assert list(with_fix) == list(ruffs[0])
    assert _shape(with_fix) == _shape(ruffs[0])
    assert {f["name"] for f in findings} >= {"swa-loc-int64", "mapping-write-without-invalidation"}
    for finding in findings:
        assert finding["cell"] is None and finding["severity"] == "error"
        assert os.path.isabs(finding["filename"])
        assert Path(finding["filename"]).parent == examples.resolve()
        assert finding["noqa_row"] == finding["location"]["row"]  # no joined rows here
        assert finding["url"].endswith(f"docs/rules/{finding['code']}.md")


def test_json_lines_is_the_array_one_object_a_line(
    examples: Path, findings: list[dict[str, Any]]
) -> None:
    out = run(examples, "audit", "--output-format", "json-lines", rc=1).stdout
    assert [json.loads(line) for line in out.splitlines()] == findings
    assert all(line.startswith('{"cell":null,"code":') for line in out.splitlines())


def test_every_engine_code_has_a_page(findings: list[dict[str, Any]]) -> None:
    for code in ("SWA100", "SWA999"):
        assert (REPO / "docs" / "rules" / f"{code}.md").is_file()


# -- the consumers' schemas -------------------------------------------------------------


def test_gitlab_code_quality_matches_gitlabs_schema(
    examples: Path, findings: list[dict[str, Any]]
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((HERE / "gitlab_code_quality.json").read_text())
    issues = json.loads(run(examples, "audit", "--output-format", "gitlab", rc=1).stdout)
    jsonschema.validate(issues, schema)
    assert len(issues) == len(findings)
    assert len({issue["fingerprint"] for issue in issues}) == len(issues)
    assert {issue["location"]["path"] for issue in issues} >= {"swa_memory_pool.py"}
    # Relative to CI_PROJECT_DIR in a GitLab job, wherever swacheck runs.
    inside = run(
        examples / "..",
        "audit",
        "examples",
        "--output-format",
        "gitlab",
        rc=1,
        env={"CI_PROJECT_DIR": str(examples)},
    )
    assert [i["location"]["path"] for i in json.loads(inside.stdout)] == [
        i["location"]["path"] for i in issues
    ]
    jsonschema.validate([], schema)
    clean = run(examples, "audit", "--select", "SWA100", "--output-format", "gitlab", rc=0)
    assert json.loads(clean.stdout) == []


def test_gitlab_fingerprints_survive_moved_lines(examples: Path, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    shutil.copytree(examples, moved)
    before = json.loads(run(moved, "audit", "--output-format", "gitlab", rc=1).stdout)
    pool = moved / "swa_memory_pool.py"
    pool.write_text("# a new first line\n\n" + pool.read_text())
    after = json.loads(run(moved, "audit", "--output-format", "gitlab", rc=1).stdout)
    assert {i["fingerprint"] for i in before} == {i["fingerprint"] for i in after}
    assert [i["location"]["positions"]["begin"]["line"] for i in after] != [
        i["location"]["positions"]["begin"]["line"] for i in before
    ]


def test_junit_matches_the_junit_schema(examples: Path, findings: list[dict[str, Any]]) -> None:
    xmlschema = pytest.importorskip("xmlschema")
    schema = xmlschema.XMLSchema(str(HERE / "junit.xsd"))
    out = run(examples, "audit", "--output-format", "junit", rc=1).stdout
    assert out.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="swacheck"')
    schema.validate(out)
    import xml.etree.ElementTree as ET

    root = ET.fromstring(out)
    cases = root.findall("testsuite/testcase")
    assert (
        int(root.get("tests", "0")) == int(root.get("failures", "0")) == len(cases) == len(findings)
    )
    for suite in root.findall("testsuite"):
        assert os.path.isabs(suite.get("name", ""))
        assert int(suite.get("failures", "0")) == len(suite.findall("testcase"))
    by_place = {(f["code"], f["location"]["row"], f["message"]) for f in findings}
    assert {
        (
            c.get("name", "").rsplit(".", 1)[1],
            int(c.get("line", "0")),
            c.find("failure").get("message"),
        )
        for c in cases
    } == by_place
    clean = run(examples, "audit", "--select", "SWA100", "--output-format", "junit", rc=0).stdout
    schema.validate(clean)
    assert 'failures="0"' in clean and "No errors found" in clean


def test_junit_escapes_what_xml_cannot_hold(tmp_path: Path) -> None:
    xmlschema = pytest.importorskip("xmlschema")
    (tmp_path / "ctl\x1bname.py").write_text(
        "import torch\nout_cache_loc_swa = torch.zeros(8, dtype=torch.int64)\n"
    )
    out = run(tmp_path, "audit", "--output-format", "junit", rc=1).stdout
    xmlschema.XMLSchema(str(HERE / "junit.xsd")).validate(out)
    assert "ctl\\x1bname" in out


def test_sarif_describes_the_engine_codes_too(examples: Path) -> None:
    (examples / "unused.py").write_text("x = 1  # noqa: SWA002\n")
    try:
        out = run(
            examples, "audit", "--extend-select", "SWA100", "--output-format", "sarif", rc=1
        ).stdout
    finally:
        (examples / "unused.py").unlink()
    run_ = json.loads(out)["runs"][0]
    rules = [rule["id"] for rule in run_["tool"]["driver"]["rules"]]
    assert {"SWA100", "SWA999"} <= set(rules)
    (unused,) = [r for r in run_["results"] if r["ruleId"] == "SWA100"]
    assert rules[unused["ruleIndex"]] == "SWA100"


# -- grouped, azure, rdjson: each derived from the JSON as ruff's are from ruff's --------

# A file whose findings have rows and columns of several widths, safe, unsafe and no fixes.
RUFF_SOURCE = (
    "import os\n"
    + "".join(f"x{i} = 1\n" for i in range(10))
    + "def f():\n    import json\n    y = 1\n    return 1\nz = 1;          import sys\n"
)


@pytest.fixture(scope="module")
def ruff_formats(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """ruff's own output, by format, on two files (ruff is in the test extra)."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff not installed")
    folder = tmp_path_factory.mktemp("ruff-formats")
    (folder / "b.py").write_text(RUFF_SOURCE)
    (folder / "a.py").write_text("import os\n")
    outputs = {}
    command = [ruff, "check", "--isolated", "--no-cache", "--select", "F401,F841,E402,E702"]
    for name in ("json", "grouped", "azure", "rdjson", "sarif"):
        outputs[name] = subprocess.run(
            [*command, "--output-format", name, "a.py", "b.py"],
            cwd=folder,
            capture_output=True,
            text=True,
        ).stdout
    outputs["cwd"] = str(folder)
    return outputs


def grouped_of(findings: list[dict[str, Any]], cwd: str) -> str:
    """The groups (before the summary) ruff's ``grouped`` writes for these JSON findings."""
    by_file: dict[str, list[dict[str, Any]]] = {}
    for finding in findings:
        by_file.setdefault(os.path.relpath(finding["filename"], cwd), []).append(finding)
    lines = []
    for name in sorted(by_file):
        group = by_file[name]
        rows = max(len(str(f["location"]["row"])) for f in group)
        columns = max(len(str(f["location"]["column"])) for f in group)
        lines.append(f"{name}:")
        for f in group:
            safe = f["fix"] is not None and f["fix"]["applicability"] == "safe"
            row, column = f["location"]["row"], f["location"]["column"]
            mark = " [*]" if safe else ""
            lines.append(f"  {row:>{rows}}:{column:<{columns}} {f['code']}{mark} {f['message']}")
        lines.append("")
    return "".join(line + "\n" for line in lines)


def azure_of(findings: list[dict[str, Any]]) -> str:
    return "".join(
        f"##vso[task.logissue type=error;sourcepath={f['filename']};"
        f"linenumber={f['location']['row']};columnnumber={f['location']['column']};"
        f"code={f['code']};]{f['message']}\n"
        for f in findings
    )


def rdjson_of(findings: list[dict[str, Any]], source: dict[str, str]) -> dict[str, Any]:
    def span(start: dict[str, int], end: dict[str, int]) -> dict[str, Any]:
        return {
            "end": {"column": end["column"], "line": end["row"]},
            "start": {"column": start["column"], "line": start["row"]},
        }

    diagnostics = []
    for f in findings:
        diagnostic = {
            "code": {"url": f["url"], "value": f["code"]},
            "location": {"path": f["filename"], "range": span(f["location"], f["end_location"])},
            "message": f["message"],
        }
        if f["fix"]:
            diagnostic["suggestions"] = [
                {"range": span(e["location"], e["end_location"]), "text": e["content"]}
                for e in f["fix"]["edits"]
            ]
        diagnostics.append(diagnostic)
    return {"diagnostics": diagnostics, "severity": "WARNING", "source": source}


def test_grouped_is_ruffs_layout_and_summary(
    examples: Path, findings: list[dict[str, Any]], ruff_formats: dict[str, str]
) -> None:
    theirs = json.loads(ruff_formats["json"])
    groups = ruff_formats["grouped"].partition("Found ")[0]
    assert groups == grouped_of(theirs, ruff_formats["cwd"])  # the derivation is ruff's
    out = run(examples, "audit", "--output-format", "grouped", rc=1).stdout
    ours, _, ours_summary = out.partition("Found ")
    assert ours == grouped_of(findings, str(examples))
    concise = run(examples, "audit", "--output-format", "concise", rc=1).stdout
    assert ours_summary == concise.partition("Found ")[2]  # the same closing lines
    coloured = run(examples, "audit", "--output-format", "grouped", "--color", "always").stdout
    assert coloured.startswith("\x1b[4mcuda_graph_runner.py\x1b[0m:\n")


def test_azure_is_ruffs_logging_commands(
    examples: Path, findings: list[dict[str, Any]], ruff_formats: dict[str, str]
) -> None:
    assert ruff_formats["azure"] == azure_of(json.loads(ruff_formats["json"]))
    out = run(examples, "audit", "--output-format", "azure", rc=1).stdout
    assert out == azure_of(findings)


def test_azure_escapes_what_would_end_a_command(tmp_path: Path) -> None:
    (tmp_path / "semi;colon].py").write_text(
        "import torch\nout_cache_loc_swa = torch.zeros(8, dtype=torch.int64)\n"
    )
    (line,) = run(tmp_path, "audit", "--output-format", "azure", rc=1).stdout.splitlines()
    assert f"sourcepath={tmp_path}/semi%3Bcolon%5D.py;linenumber=2;" in line


def test_rdjson_is_ruffs_document(
    examples: Path, findings: list[dict[str, Any]], ruff_formats: dict[str, str]
) -> None:
    theirs = json.loads(ruff_formats["rdjson"])
    assert theirs == rdjson_of(json.loads(ruff_formats["json"]), theirs["source"])
    ours = json.loads(run(examples, "audit", "--output-format", "rdjson", rc=1).stdout)
    source = {"name": "swacheck", "url": "https://github.com/swacheck/swacheck"}
    assert ours == rdjson_of(findings, source)
    assert any("suggestions" in d for d in ours["diagnostics"])
    clean = run(examples, "audit", "--select", "SWA100", "--output-format", "rdjson", rc=0)
    assert json.loads(clean.stdout)["diagnostics"] == []


def _applied(text: str, replacements: list[dict[str, Any]]) -> str:
    """``text`` with SARIF replacements applied (1-based lines and columns), last first."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column - 1

    spans = []
    for r in replacements:
        region = r["deletedRegion"]
        start = offset(region["startLine"], region["startColumn"])
        end = offset(region["endLine"], region["endColumn"])
        spans.append((start, end, r.get("insertedContent", {}).get("text", "")))
    for start, end, inserted in sorted(spans, reverse=True):
        text = text[:start] + inserted + text[end:]
    return text


def test_sarif_has_ruffs_severity_its_fixes_and_each_rules_page(
    examples: Path, findings: list[dict[str, Any]], ruff_formats: dict[str, str], tmp_path: Path
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((HERE / "sarif_2_1_0_required.json").read_text())
    theirs = json.loads(ruff_formats["sarif"])["runs"][0]
    document = json.loads(run(examples, "audit", "--output-format", "sarif", rc=1).stdout)
    jsonschema.validate(document, schema)
    ours = document["runs"][0]
    # ruff's severity: every result and every rule's default an error.
    levels = {r["level"] for r in theirs["results"]}
    levels |= {r["defaultConfiguration"]["level"] for r in theirs["tool"]["driver"]["rules"]}
    assert levels == {"error"}
    assert {r["level"] for r in ours["results"]} == levels
    assert {r["defaultConfiguration"]["level"] for r in ours["tool"]["driver"]["rules"]} == levels
    # Each rule's help is its page, as `swacheck rule CODE` prints it (docs/ci.md says so).
    pages = json.loads(run(examples, "rule", "--all", "--output-format", "json", rc=0).stdout)
    explained = {d["code"]: d["explanation"] for d in pages}
    for rule in ours["tool"]["driver"]["rules"]:
        assert rule["help"] == {"text": explained[rule["id"]], "markdown": explained[rule["id"]]}
    # A result carries its fix, safe or unsafe, as ruff's do; applied, the fixes of every
    # file are what `--fix --unsafe-fixes` writes.
    assert any("fixes" in r for r in theirs["results"])
    assert [bool(r.get("fixes")) for r in ours["results"]] == [bool(f["fix"]) for f in findings]
    by_file: dict[str, list[dict[str, Any]]] = {}
    for result in ours["results"]:
        for fix in result.get("fixes", []):
            (change,) = fix["artifactChanges"]
            by_file.setdefault(change["artifactLocation"]["uri"], []).extend(change["replacements"])
    fixed = tmp_path / "fixed"
    shutil.copytree(examples, fixed)
    run(fixed, "audit", "--fix", "--unsafe-fixes", "--no-cache", rc=1)
    assert by_file
    for name, replacements in by_file.items():
        after = _applied((examples / name).read_text(), replacements)
        assert after == (fixed / name).read_text(), name


# -- the line formats ----------------------------------------------------------------


def test_pylint_and_github(examples: Path, findings: list[dict[str, Any]]) -> None:
    pylint = run(examples, "audit", "--output-format", "pylint", rc=1).stdout.splitlines()
    assert pylint == [
        f"{Path(f['filename']).name}:{f['location']['row']}: [{f['code']}] {f['message']}"
        for f in findings
    ]
    github = run(examples, "audit", "--output-format", "github", rc=1).stdout.splitlines()
    assert len(github) == len(findings)
    for line, f in zip(github, findings, strict=True):
        name = Path(f["filename"]).name
        start, end = f["location"], f["end_location"]
        escaped = f["filename"].replace(":", "%3A").replace(",", "%2C")
        props = (
            f"::error title=swacheck ({f['code']}),file={escaped},"
            f"line={start['row']},col={start['column']},"
            f"endLine={end['row']},endColumn={end['column']}::"
        )
        assert line.startswith(props), line
        message = f"{name}:{start['row']}:{start['column']}: {f['code']} {f['message']}"
        assert line[len(props) :].startswith(message.replace("%", "%25"))
        assert ("%0A  help: " in line) == bool(f["fix"])


# -- statistics and rules ----------------------------------------------------------------


def test_statistics_mark_each_row_as_ruff_does(examples: Path) -> None:
    rows = run(examples, "audit", "--statistics", rc=1).stdout.splitlines()
    assert rows[0] == "2\tSWA002\t[*] swa-loc-int64"
    assert "1\tSWA004\t[ ] capture-without-invalidation" in rows
    assert "1\tSWA005\t[ ] dispatch-before-invalidation" in rows
    # No row fixable: no markers at all (ruff's layout).
    plain = run(examples, "audit", "--statistics", "--select", "SWA005", rc=1).stdout
    assert plain.splitlines()[0] == "1\tSWA005\tdispatch-before-invalidation"


def test_statistics_say_what_an_inactive_rule_needs(tmp_path: Path) -> None:
    (tmp_path / "bufs.py").write_text(
        "import torch\nout_cache_loc_swa = torch.zeros(8, dtype=torch.int64)\n"
    )
    rows = run(tmp_path, "audit", "--statistics", rc=1).stdout.splitlines()
    inactive = [row for row in rows if "inactive" in row]
    needs = "no audited file defines invalidate_loc_cache (see `swacheck rule SWA001`)"
    assert f"-\tSWA001\tinactive: {needs}" in inactive
    assert all("holds what its scope needs" not in row for row in inactive)


def test_rule_all_prints_every_page(tmp_path: Path) -> None:
    text = run(tmp_path, "rule", "--all", rc=0).stdout
    codes = re.findall(r"^# (SWA\d+) \(", text, re.M)
    assert codes == sorted(codes) and {"SWA001", "SWA008", "SWA100", "SWA999"} <= set(codes)
    described = json.loads(run(tmp_path, "rule", "--all", "--output-format", "json", rc=0).stdout)
    assert [d["code"] for d in described] == codes
    one = json.loads(run(tmp_path, "rule", "swa002", "--output-format", "json", rc=0).stdout)
    assert one == next(d for d in described if d["code"] == "SWA002")
    assert run(tmp_path, "rule", rc=2).stderr.strip() == "swacheck rule: give a code or --all"


def test_help_is_plain_text(tmp_path: Path) -> None:
    for args in ((), ("audit",), ("rule",), ("rules",)):
        out = run(tmp_path, *args, "--help", rc=0).stdout
        assert "``" not in out, args
    top = run(tmp_path, "--help", rc=0).stdout
    assert "check" in top and "--inject-bug" in top
