"""Gradual adoption (issue 26, item 3): ``--add-noqa`` and the baseline, through the real
command. The pre-commit side is in test_pre_commit.py."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from swacheck.engine.noqa import noqa_rows, suppressions

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def run(cwd: Path, *args: str, rc: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    proc = subprocess.run(
        [sys.executable, "-m", "swacheck", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "SWACHECK_OUTPUT_FORMAT": "concise"},
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    if rc is not None:
        assert proc.returncode == rc, (proc.returncode, proc.stdout, proc.stderr)
    return proc


def findings(cwd: Path, *args: str) -> list[dict]:
    return json.loads(run(cwd, "audit", "--output-format", "json", *args).stdout)


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    folder = tmp_path / "examples"
    shutil.copytree(EXAMPLES, folder, ignore=shutil.ignore_patterns("*.md", "__pycache__"))
    return folder


# Joined rows, where a comment cannot go on the finding's own row: a backslash
# continuation, a string spanning rows (plain, then an f-string), and both chained.
JOINED = '''\
import torch

out_cache_loc_swa = torch.zeros(8, dtype=torch.int64); y = \\
    0
swa_loc = torch.arange(8); doc = """a
b"""
swa_out_cache_loc = torch.zeros(4, dtype=torch.int64); note = f"""{1}
"""
out_cache_loc_swa = (torch.zeros(4, dtype=torch.int64)  # the bracket holds a comment
    )
'''


class TestNoqaRows:
    def test_joined_rows_go_to_their_last_row(self) -> None:
        assert noqa_rows(JOINED) == {3: 4, 5: 6, 7: 8}

    def test_rows_inside_brackets_stay_where_they_are(self) -> None:
        assert noqa_rows("x = f(\n  1,\n  2)\n") == {}


class TestAddNoqa:
    def test_every_finding_gets_its_code_and_nothing_else_changes(self, examples: Path) -> None:
        before = {p.name: p.read_text() for p in examples.glob("*.py")}
        found = findings(examples)
        proc = run(examples, "audit", "--add-noqa", rc=0)
        assert proc.stderr == f"Added {len(found)} noqa directives.\n"
        assert findings(examples) == []
        for finding in found:
            path = Path(finding["filename"])
            row = path.read_text().splitlines()[finding["noqa_row"] - 1]
            old = before[path.name].splitlines()[finding["noqa_row"] - 1]
            assert row.startswith(old.rstrip() + "  # noqa: ")
            assert finding["code"] in row.split("# noqa: ", 1)[1]
        for name, text in before.items():
            after = (examples / name).read_text().splitlines()
            assert len(after) == len(text.splitlines())
            changed = [a for a, b in zip(after, text.splitlines(), strict=True) if a != b]
            assert all("  # noqa: SWA" in line for line in changed)
        # Idempotent: nothing is left to add, and nothing is printed.
        again = run(examples, "audit", "--add-noqa", rc=0)
        assert again.stderr == ""
        assert {p.name: p.read_text() for p in examples.glob("*.py")} == {
            name: (examples / name).read_text() for name in before
        }

    def test_joined_rows_and_existing_comments(self, tmp_path: Path) -> None:
        target = tmp_path / "bufs.py"
        target.write_text(JOINED)
        found = findings(tmp_path)
        assert sorted((f["location"]["row"], f["noqa_row"]) for f in found) == [
            (3, 4),
            (5, 6),
            (7, 8),
            (9, 9),
        ]
        run(tmp_path, "audit", "--add-noqa", rc=0)
        text = target.read_text()
        ast.parse(text)
        rows = text.splitlines()
        assert rows[2].endswith("\\")  # the continuation is untouched
        assert rows[3] == "    0  # noqa: SWA002"
        assert rows[5] == 'b"""  # noqa: SWA002'
        assert rows[7] == '"""  # noqa: SWA002'
        assert rows[8].endswith("# the bracket holds a comment  # noqa: SWA002")
        # The strings' contents did not change.
        assert 'doc = """a\nb"""' in text and 'note = f"""{1}\n"""' in text
        assert findings(tmp_path) == []

    def test_codes_join_an_existing_noqa_and_a_reason_follows(self, tmp_path: Path) -> None:
        target = tmp_path / "bufs.py"
        target.write_bytes(
            b"# -*- coding: latin-1 -*-\r\nimport torch\r\n"
            b"swa_loc = torch.zeros(8, dtype=torch.int64)  # noqa:E501  keep this \xe9\r\n"
            b"out_cache_loc_swa = torch.zeros(8, dtype=torch.int64)  # type: ignore\r\n"
        )
        run(tmp_path, "audit", "--add-noqa=legacy, see #12", rc=0)
        data = target.read_bytes()
        assert data.count(b"\r\n") == 4 and b"\n" not in data.replace(b"\r\n", b"")
        assert b"# noqa:E501, SWA002  keep this \xe9\r\n" in data
        assert b"# type: ignore  # noqa: SWA002 legacy, see #12\r\n" in data
        found = suppressions(data)
        assert all(found.lines[row].covers("SWA002") for row in (3, 4))

    def test_a_file_changed_during_the_audit_is_left_alone(self, tmp_path: Path) -> None:
        from swacheck.config import resolve_config
        from swacheck.engine.workspace import Workspace
        from swacheck.rules import all_rules

        target = tmp_path / "bufs.py"
        target.write_text("import torch\nswa_loc = torch.zeros(8, dtype=torch.int64)\n")
        config = resolve_config(None, [tmp_path])
        workspace = Workspace.for_paths([tmp_path], config, all_rules(), cache=False)
        original = Workspace._add_noqa

        def edit_first(self, report, result, reason):  # the user saves mid-audit
            target.write_text("import torch\n\nswa_loc = torch.zeros(8, dtype=torch.int64)\n")
            return original(self, report, result, reason)

        Workspace._add_noqa = edit_first  # type: ignore[method-assign]
        try:
            result = workspace.audit([tmp_path], add_noqa="")
        finally:
            Workspace._add_noqa = original  # type: ignore[method-assign]
        assert "noqa" not in target.read_text()
        assert result.noqa_added == 0 and len(result.findings) == 1
        assert any("changed during the audit" in e for e in result.errors)

    def test_usage_errors(self, examples: Path) -> None:
        for args, message in (
            (("--add-noqa", "--fix"), "--add-noqa cannot be used with --fix"),
            (("--add-noqa", "--diff"), "--add-noqa cannot be used with --diff"),
            (("--add-noqa", "-"), "--add-noqa writes files: it cannot be used with stdin"),
            (("--write-baseline",), "--write-baseline needs --baseline FILE"),
        ):
            assert message in run(examples, "audit", *args, rc=2).stderr


class TestBaseline:
    def test_only_new_findings_fail_and_moved_ones_still_match(self, examples: Path) -> None:
        baseline = examples / "swacheck-baseline.json"
        total = len(findings(examples))
        written = run(examples, "audit", "--baseline", baseline.name, "--write-baseline", rc=0)
        assert written.stderr == (
            f"Wrote {total} findings to the baseline {baseline.name} ({total} found now).\n"
        )
        recorded = json.loads(baseline.read_text())
        assert recorded["swacheck-baseline"] == 1 and len(recorded["findings"]) == total
        # Nothing changed: nothing to say, on either stream but the summary (issue 40).
        quiet = run(examples, "audit", "--baseline", baseline.name, rc=0)
        assert (quiet.stdout, quiet.stderr) == ("All checks passed!\n", "")
        # Lines added above every finding, a finding re-indented: still recorded, still
        # nothing to say.
        pool = examples / "swa_memory_pool.py"
        pool.write_text("# moved\n\n" + pool.read_text())
        runner = examples / "model_runner.py"
        runner.write_text(runner.read_text().replace("\n\n", "\n\n# one more line\n", 1))
        assert run(examples, "audit", "--baseline", baseline.name, rc=0).stderr == ""
        # A new finding fails, a second copy of a recorded line too; fixing one is stale.
        text = pool.read_text()
        text = text.replace(
            "key = (kv_indices.untyped_storage().data_ptr(), kv_indices.numel())",
            "key = (kv_indices.data_ptr(), kv_indices.numel())",
        )
        pool.write_text(text)
        (examples / "new.py").write_text(
            "import torch\nout_cache_loc_swa = torch.zeros(8, dtype=torch.int64)\n"
            "out_cache_loc_swa = torch.zeros(8, dtype=torch.int64)\n"
        )
        proc = run(examples, "audit", "--baseline", baseline.name, rc=1)
        assert [line.split(":")[0] for line in proc.stdout.splitlines()[:-2]] == [
            "new.py",
            "new.py",
        ]
        assert "1 baseline entry of swacheck-baseline.json found no finding" in proc.stderr
        assert "swa_memory_pool.py: SWA006 on `key = (kv_indices.untyped_storage()" in proc.stderr
        # A duplicate of a recorded line is new: the record counts occurrences.
        (examples / "new.py").unlink()
        lines = pool.read_text().splitlines(keepends=True)
        row = next(i for i, line in enumerate(lines) if "self._cached_swa_loc = self" in line)
        pool.write_text("".join([*lines[: row + 1], lines[row], *lines[row + 1 :]]))
        dup_findings = findings(examples, "--baseline", baseline.name)
        assert [
            (Path(f["filename"]).name, f["code"], f["location"]["row"]) for f in dup_findings
        ] == [("swa_memory_pool.py", "SWA002", row + 2)]

    def test_a_partial_run_keeps_the_other_files_entries(self, examples: Path) -> None:
        baseline = examples / "baseline.json"
        found = findings(examples)
        files = {Path(f["filename"]).name for f in found}
        run(examples, "audit", "--baseline", "baseline.json", "--write-baseline", rc=0)
        pool = examples / "swa_memory_pool.py"
        pool.write_text(pool.read_text().replace("untyped_storage().data_ptr()", "data_ptr()"))
        run(
            examples,
            "audit",
            "swa_memory_pool.py",
            "--baseline",
            "baseline.json",
            "--write-baseline",
            rc=0,
        )
        entries = json.loads(baseline.read_text())["findings"]
        assert len(entries) == len(found) - 1  # the SWA006 fixed above
        assert {e["file"] for e in entries} == files
        # Deselected codes keep theirs too.
        run(
            examples,
            "audit",
            "--select",
            "SWA002",
            "--baseline",
            "baseline.json",
            "--write-baseline",
            rc=0,
        )
        assert len(json.loads(baseline.read_text())["findings"]) == len(found) - 1

    def test_files_are_named_relative_to_the_baseline(self, examples: Path) -> None:
        run(examples, "audit", "--baseline", "ci/baseline.json", "--write-baseline", rc=2)
        (examples / "ci").mkdir()
        run(examples, "audit", "--baseline", "ci/baseline.json", "--write-baseline", rc=0)
        entries = json.loads((examples / "ci" / "baseline.json").read_text())["findings"]
        assert {e["file"] for e in entries} >= {"../swa_memory_pool.py"}
        # The same baseline read from another working directory.
        run(examples / "ci", "audit", "..", "--baseline", "baseline.json", rc=0)

    def test_bad_baselines_are_usage_errors_naming_the_file(self, examples: Path) -> None:
        missing = run(examples, "audit", "--baseline", "nope.json", rc=2).stderr
        assert "nope.json: no such file (write one with --write-baseline)" in missing
        (examples / "bad.json").write_text("[1, 2]")
        assert (
            "bad.json: not a swacheck baseline"
            in run(examples, "audit", "--baseline", "bad.json", rc=2).stderr
        )
        (examples / "broken.json").write_text("{")
        assert (
            "broken.json: not JSON"
            in run(examples, "audit", "--baseline", "broken.json", rc=2).stderr
        )
