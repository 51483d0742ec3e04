"""The command line as ruff users expect it (issue 17, sections 2 and 3), on the bundled
examples and real files, through the real ``swacheck`` command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
INT64_SWA = (
    "import torch\n\nout_cache_loc_swa = torch.zeros((8,), dtype=torch.int64)\n"
    "\n\ndef set_kv_buffer(layer, swa_loc, cache_k, cache_v):\n"
    "    assert swa_loc.dtype == torch.int32  # the KV store takes int32: a safe fix\n"
)
# examples/swa_memory_pool.py:30 has an SWA002 whose fix is unsafe (a cast of a gather).
UNSAFE_ROW = "swa_memory_pool.py:30:36: SWA002 "
# The examples' findings, one per row of examples/README.md (test_docs checks the rows).
FINDINGS = 12
# The lines these tests read are ``concise``'s; the default (``full``) is tested in
# test_cli_formats.py.
CONCISE = {"SWACHECK_OUTPUT_FORMAT": "concise"}


def run(
    cwd: Path,
    *args: str,
    rc: int | None = None,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
    python: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    proc = subprocess.run(
        [sys.executable, *python, "-m", "swacheck", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        timeout=120,
        env={**environ, **CONCISE, **(env or {})},
    )
    out = subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    )
    assert "Traceback" not in out.stderr, out.stderr
    if rc is not None:
        assert out.returncode == rc, (out.returncode, out.stdout, out.stderr)
    return out


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    folder = tmp_path / "examples"
    shutil.copytree(EXAMPLES, folder, ignore=shutil.ignore_patterns("*.md", "__pycache__"))
    return folder


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


# -- section 2 ---------------------------------------------------------------------------


def test_an_empty_folder_warns_and_passes(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    proc = run(tmp_path, "audit", "empty", rc=0)
    assert "warning: No Python files found under the given path(s)" in proc.stderr
    assert proc.stdout == "All checks passed!\n"


class TestStdin:
    def test_stdin_is_audited_under_its_file_name(self, examples: Path) -> None:
        source = (examples / "swa_memory_pool.py").read_bytes()
        named = run(examples, "audit", "-", "--stdin-filename", "pool.py", stdin=source, rc=1)
        lines = named.stdout.splitlines()
        assert lines[0].startswith("pool.py:23:9: SWA008 ")
        assert sum(line.startswith("pool.py:") for line in lines) == 4
        bare = run(examples, "audit", "-", stdin=source, rc=1)
        assert bare.stdout.startswith("-:23:9: SWA008 ")

    def test_fix_writes_the_fixed_source_to_stdout(self, examples: Path) -> None:
        target = examples / "cuda_graph_runner.py"
        source = target.read_bytes()
        proc = run(
            examples,
            "audit",
            "--fix",
            # alone (no project), nothing shows what its SWA locations' consumers take
            "--unsafe-fixes",
            "-",
            "--stdin-filename",
            "cuda_graph_runner.py",
            stdin=source,
            rc=0,
        )
        assert "dtype=torch.int32)\n" in proc.stdout
        assert "self.out_cache_loc_swa.zero_()" in proc.stdout
        assert "Found 2 findings (2 fixed, 0 remaining)." in proc.stderr
        assert target.read_bytes() == source  # nothing written
        clean = run(examples, "audit", "--fix", "-", stdin=b"x = 1\n", rc=0)
        assert clean.stdout == "x = 1\n"

    def test_stdin_is_audited_in_its_project(self, examples: Path) -> None:
        subprocess.run(["git", "init", "-q"], cwd=examples, check=True)
        source = (examples / "model_runner.py").read_bytes()
        proc = run(
            examples, "audit", "-", "--stdin-filename", "model_runner.py", stdin=source, rc=1
        )
        assert "model_runner.py:13:20: SWA005 " in proc.stdout


def test_statistics_are_counts_only_and_json_when_asked(examples: Path) -> None:
    text = run(examples, "audit", "--statistics", rc=1).stdout
    assert "SWA002" in text and ": SWA" not in text  # no finding lines
    assert text.splitlines()[0] == "2\tSWA002\t[*] swa-loc-int64"
    proc = run(examples, "audit", "--statistics", "--output-format", "json", rc=1)
    rows = json.loads(proc.stdout)  # the whole output is the document
    by_code = {row["code"]: row for row in rows}
    assert by_code["SWA002"] == {
        "code": "SWA002",
        "name": "swa-loc-int64",
        "count": 2,
        "fixable": True,
        "fixable_count": 1,
    }
    assert sum(row["count"] for row in rows) == FINDINGS
    sarif = run(examples, "audit", "--statistics", "--output-format", "sarif", rc=1)
    assert json.loads(sarif.stdout)


def test_the_fix_marker_means_fix_applies_it(examples: Path) -> None:
    plain = run(examples, "audit", rc=1).stdout
    [unsafe] = [line for line in plain.splitlines() if line.startswith(UNSAFE_ROW)]
    assert "[*]" not in unsafe
    assert plain.endswith(
        f"Found {FINDINGS} findings.\n"
        "[*] 5 fixable with `--fix` (1 unsafe fix available with `--fix --unsafe-fixes`).\n"
    )
    opted = run(examples, "audit", "--unsafe-fixes", rc=1).stdout
    assert f"{UNSAFE_ROW}[*]" in opted
    assert opted.endswith(f"Found {FINDINGS} findings.\n[*] 6 fixable with `--fix`.\n")
    only_unsafe = run(examples, "audit", "--select", "SWA002", "swa_memory_pool.py", rc=1)
    assert only_unsafe.stdout.endswith(
        "Found 1 finding.\n1 unsafe fix available with `--fix --unsafe-fixes`.\n"
    )


def test_diff_says_what_it_would_fix_and_writes_nothing(examples: Path) -> None:
    before = {p.name: p.read_bytes() for p in examples.glob("*.py")}
    proc = run(examples, "audit", "--fix", "--diff", rc=1)
    assert proc.stdout.count("+++ b/") == 3
    assert proc.stdout.endswith("Would fix 5 findings.\n")
    assert {p.name: p.read_bytes() for p in examples.glob("*.py")} == before
    hidden = run(examples, "audit", "--diff", "--select", "SWA002", "swa_memory_pool.py", rc=0)
    assert hidden.stdout == (
        "No findings would be fixed (1 fix available with `--unsafe-fixes`).\n"
    )


def test_summary_after_fix_and_show_fixes(examples: Path) -> None:
    proc = run(examples, "audit", "--fix", "--show-fixes", rc=1)
    assert "Fixed 5 findings:\n- cuda_graph_runner.py:\n    1 × SWA002 (swa-loc-int64)\n" in (
        proc.stdout
    )
    assert "    1 × SWA006 (storage-pointer-cache-key)\n" in proc.stdout
    assert f"Found {FINDINGS} findings (5 fixed, {FINDINGS - 5} remaining).\n" in proc.stdout
    assert proc.stdout.endswith("1 unsafe fix available with `--fix --unsafe-fixes`.\n")


def test_exit_non_zero_on_fix(tmp_path: Path) -> None:
    write(tmp_path / "bufs.py", INT64_SWA)
    run(tmp_path, "audit", "--fix", "--exit-non-zero-on-fix", rc=1)
    assert "torch.int32" in (tmp_path / "bufs.py").read_text()
    run(tmp_path, "audit", "--fix", "--exit-non-zero-on-fix", rc=0)  # nothing left to fix


def test_force_exclude_applies_excludes_to_explicit_paths(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.swacheck]\nextend-exclude = ['vendor']\n")
    write(tmp_path / "vendor" / "b.py", INT64_SWA)
    write(tmp_path / "src" / "a.py", INT64_SWA)
    run(tmp_path, "audit", "vendor/b.py", rc=1)
    proc = run(tmp_path, "audit", "--force-exclude", "vendor/b.py", "src/a.py", rc=1)
    assert [line.split(":")[0] for line in proc.stdout.splitlines()[:-2]] == ["src/a.py"]
    run(tmp_path, "audit", "--force-exclude", "vendor", rc=0)


def test_pre_commit_hooks_force_exclude() -> None:
    hooks = (REPO / ".pre-commit-hooks.yaml").read_text()
    entries = [line.split(":", 1)[1].strip() for line in hooks.splitlines() if "entry:" in line]
    assert entries and all("--force-exclude" in entry.split() for entry in entries)


def test_demo_without_its_extra_says_which_and_exits_2(tmp_path: Path) -> None:
    # A base install: torch cannot be imported (sys.modules[name] = None makes it so).
    hide = "import sys; sys.modules['torch'] = None; from swacheck.cli import main; "
    for args in (["demo"], ["demo", "--help"]):
        code = hide + f"sys.exit(main({args!r}))"
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True
        )
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        assert "`reference` extra" in proc.stderr and "not installed: torch" in proc.stderr
        assert "pip install '.[reference]'" in proc.stderr


def test_parse_error_position_is_pythons(tmp_path: Path) -> None:
    write(tmp_path / "broken.py", "def f(:\n    swa_loc = 1\n")
    proc = run(tmp_path, "audit", rc=1)
    assert proc.stdout.startswith("broken.py:1:7: SWA999 File could not be parsed (syntax error")
    page = run(tmp_path, "rule", "SWA999", rc=0).stdout
    assert page.startswith("# SWA999 (cannot-analyse)") and "## What it does" in page


def test_a_file_name_with_a_newline_stays_on_one_line(tmp_path: Path) -> None:
    write(tmp_path / "new\nline.py", INT64_SWA)
    proc = run(tmp_path, "audit", rc=1)
    assert proc.stdout.splitlines()[0].startswith("new\\nline.py:3:45: SWA002 ")
    listed = run(tmp_path, "audit", "--output-format", "json", rc=1).stdout
    assert json.loads(listed)[0]["filename"] == str(tmp_path / "new\nline.py")


class TestPerFileBounds:
    def test_a_huge_swa_dense_file_is_answered_at_once(self, tmp_path: Path) -> None:
        pool = (EXAMPLES / "swa_memory_pool.py").read_text()
        copies = 20 * 2**20 // len(pool) + 1  # 20 MB of SWA pool classes
        write(tmp_path / "generated.py", pool * copies)
        write(tmp_path / "bufs.py", INT64_SWA)
        proc = run(tmp_path, "audit", "--no-cache", "--output-format", "json", rc=1)
        found = {Path(f["filename"]).name: f for f in json.loads(proc.stdout)}
        assert found["bufs.py"]["code"] == "SWA002"
        assert found["generated.py"]["code"] == "SWA999"
        assert "too large to analyse" in found["generated.py"]["message"]
        assert "`max-file-size`" in found["generated.py"]["message"]

    def test_the_size_limit_is_configurable(self, tmp_path: Path) -> None:
        write(tmp_path / "bufs.py", INT64_SWA)
        small = f"max-file-size = {len(INT64_SWA) - 1}"
        proc = run(tmp_path, "audit", "--config", small, rc=1)
        assert "SWA999 File too large to analyse" in proc.stdout
        run(tmp_path, "audit", "--config", "max-file-size = 0", rc=1)  # 0: no limit
        assert "SWA002" in run(tmp_path, "audit", "--config", "max-file-size = 0").stdout

    def test_a_file_whose_analysis_runs_out_of_time(self, tmp_path: Path) -> None:
        # 300 SWA pool classes: a few seconds of analysis, bounded to a tenth of one.
        pool = (EXAMPLES / "swa_memory_pool.py").read_text()
        write(
            tmp_path / "dense.py", "".join(pool.replace("SWAKVPool", f"P{i}") for i in range(300))
        )
        write(tmp_path / "bufs.py", INT64_SWA)
        proc = run(tmp_path, "audit", "--no-cache", "--config", "max-file-time = 0.1", rc=1)
        lines = proc.stdout.splitlines()
        slow = "SWA999 File too slow to analyse (over 0.1 s of CPU time: `max-file-time`)"
        assert f"dense.py:1:1: {slow}" in lines
        assert any(line.startswith("bufs.py:3:45: SWA002") for line in lines)


# -- section 3 ---------------------------------------------------------------------------


def test_extend_select_adds_to_select(examples: Path) -> None:
    proc = run(examples, "audit", "--select", "SWA002", "--extend-select", "SWA008", rc=1)
    codes = {line.split()[1] for line in proc.stdout.splitlines() if ": SWA" in line}
    assert codes == {"SWA002", "SWA008"}
    write(examples / "pyproject.toml", "[tool.swacheck]\nselect = ['SWA002']\n")
    configured = run(examples, "audit", "--extend-select", "SWA006", rc=1).stdout
    assert {line.split()[1] for line in configured.splitlines() if ": SWA" in line} == {
        "SWA002",
        "SWA006",
    }


def test_quiet_and_silent(examples: Path) -> None:
    quiet = run(examples, "audit", "-q", rc=1).stdout
    assert quiet.count("\n") == FINDINGS and "Found" not in quiet
    silent = run(examples, "audit", "--silent", rc=1)
    assert silent.stdout == silent.stderr == ""
    assert run(examples, "audit", "-q", "--select", "SWA999", rc=0).stdout == ""


def test_output_file(examples: Path) -> None:
    proc = run(examples, "audit", "-o", "report.json", "--output-format", "json", rc=1)
    assert proc.stdout == ""
    assert len(json.loads((examples / "report.json").read_text())) == FINDINGS
    run(examples, "audit", "--output-file", "report.txt", rc=1)
    assert (
        (examples / "report.txt")
        .read_text()
        .endswith(
            f"Found {FINDINGS} findings.\n"
            + ("[*] 5 fixable with `--fix` (1 unsafe fix available with `--fix --unsafe-fixes`).\n")
        )
    )


def test_colour_on_a_terminal_or_when_forced(tmp_path: Path) -> None:
    write(tmp_path / "bufs.py", INT64_SWA)
    piped = run(tmp_path, "audit", rc=1).stdout
    assert "\x1b[" not in piped
    forced = run(tmp_path, "audit", env={"FORCE_COLOR": "1"}, rc=1).stdout
    assert forced.startswith("\x1b[1mbufs.py\x1b[0m\x1b[36m:\x1b[0m3")
    assert "\x1b[1m\x1b[31mSWA002\x1b[0m" in forced
    assert "\x1b[" not in run(tmp_path, "audit", env={"FORCE_COLOR": "1", "NO_COLOR": "1"}).stdout
    assert "\x1b[" in run(tmp_path, "audit", "--color", "always").stdout
    never = run(tmp_path, "audit", "--color", "never", env={"FORCE_COLOR": "1"}).stdout
    assert "\x1b[" not in never
    # Machine formats are never coloured.
    json.loads(run(tmp_path, "audit", "--color", "always", "--output-format", "json").stdout)


def test_file_level_suppression(tmp_path: Path) -> None:
    write(tmp_path / "all.py", "# swacheck: noqa\n" + INT64_SWA)
    write(tmp_path / "one.py", INT64_SWA + "# swacheck: noqa: SWA002\n")
    write(tmp_path / "other.py", "# swacheck: noqa: SWA003\n" + INT64_SWA)
    write(tmp_path / "trailing.py", INT64_SWA.replace("\n", "  # swacheck: noqa\n", 1))
    proc = run(tmp_path, "audit", rc=1)
    files = sorted({line.split(":")[0] for line in proc.stdout.splitlines() if ": SWA" in line})
    # A file-level comment must stand on a line of its own, as ruff's file exemption must.
    assert files == ["other.py", "trailing.py"]


class TestUnusedNoqa:
    def test_off_unless_selected(self, tmp_path: Path) -> None:
        write(tmp_path / "a.py", "swa_loc = None  # noqa: SWA002\n")
        run(tmp_path, "audit", rc=0)
        proc = run(tmp_path, "audit", "--extend-select", "SWA100", rc=1)
        assert proc.stdout.startswith(
            "a.py:1:17: SWA100 [*] Unused `noqa` directive (unused: `SWA002`)"
        )

    def test_used_bare_and_foreign_directives_are_left_alone(self, tmp_path: Path) -> None:
        write(tmp_path / "used.py", INT64_SWA.replace("int64)", "int64)  # noqa: SWA002"))
        write(tmp_path / "bare.py", "swa_loc = None  # noqa\n")
        write(tmp_path / "ruff.py", "import os  # noqa: F401\n")
        run(tmp_path, "audit", "--extend-select", "SWA100", rc=0)

    def test_unknown_codes_and_files_no_rule_could_fire_in(self, tmp_path: Path) -> None:
        write(tmp_path / "plain.py", "x = 1  # noqa: SWA002, E501\n")
        write(tmp_path / "typo.py", "swa_loc = None  # noqa: SWA042\n")
        proc = run(tmp_path, "audit", "--extend-select", "SWA100", rc=1)
        assert proc.stdout.splitlines()[:2] == [
            "plain.py:1:8: SWA100 [*] Unused `noqa` directive (unused: `SWA002`)",
            "typo.py:1:17: SWA100 [*] Unused `noqa` directive (unknown: `SWA042`)",
        ]

    def test_fix_removes_the_unused_codes(self, tmp_path: Path) -> None:
        partly = write(tmp_path / "partly.py", "x = 1  # noqa: SWA002, E501\n")
        wholly = write(tmp_path / "wholly.py", "swa_loc = None  # noqa: SWA002\n")
        run(tmp_path, "audit", "--extend-select", "SWA100", "--fix", rc=0)
        assert partly.read_text() == "x = 1  # noqa: E501\n"
        assert wholly.read_text() == "swa_loc = None\n"


def test_show_settings(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.swacheck]\nignore = ['SWA008']\n")
    proc = run(tmp_path, "audit", "--show-settings", "--config", "swa-loc-dtype = 'int64'", rc=0)
    assert f"Settings path: {tmp_path / 'pyproject.toml'}" in proc.stdout
    assert 'ignore = ["SWA008"]' in proc.stdout
    assert 'swa-loc-dtype = "int64"' in proc.stdout
    assert "SWA008" not in proc.stdout.split("# enabled codes:")[1]


def test_cache_dir(tmp_path: Path) -> None:
    write(tmp_path / "bufs.py", INT64_SWA)
    run(tmp_path, "audit", "--cache-dir", "elsewhere", rc=1)
    assert (tmp_path / "elsewhere" / ".gitignore").exists()
    assert not (tmp_path / ".swacheck_cache").exists()
    run(tmp_path, "audit", env={"SWACHECK_CACHE_DIR": "viaenv"}, rc=1)
    assert (tmp_path / "viaenv" / ".gitignore").exists()


class TestInlineConfig:
    def test_key_value_overrides_the_file(self, tmp_path: Path) -> None:
        write(tmp_path / "pyproject.toml", "[tool.swacheck]\nignore = ['SWA002']\n")
        write(tmp_path / "bufs.py", INT64_SWA)
        run(tmp_path, "audit", rc=0)
        run(tmp_path, "audit", "--config", "ignore = []", rc=1)
        run(tmp_path, "audit", "--config", "swa-loc-dtype = 'int64'", "--config", "ignore=[]", rc=0)

    def test_errors_name_the_option(self, tmp_path: Path) -> None:
        write(tmp_path / "bufs.py", INT64_SWA)
        bad_key = run(tmp_path, "audit", "--config", "maping-attributes = ['m']", rc=2)
        assert "--config" in bad_key.stderr and "'maping-attributes'" in bad_key.stderr
        not_toml = run(tmp_path, "audit", "--config", "nonsense", rc=2)
        assert "TOML `KEY = VALUE` pair" in not_toml.stderr
        wrong_type = run(tmp_path, "audit", "--config", "max-file-size = 'big'", rc=2)
        assert "max-file-size: expected an integer" in wrong_type.stderr


def test_rules_as_json(tmp_path: Path) -> None:
    rules = json.loads(run(tmp_path, "rules", "--output-format", "json", rc=0).stdout)
    by_code = {rule["code"]: rule for rule in rules}
    assert {"SWA001", "SWA008", "SWA100", "SWA999"} <= set(by_code)
    assert by_code["SWA002"]["name"] == "swa-loc-int64"
    assert by_code["SWA005"]["fix"] == "Fix is not available."
    assert "## Why is this bad?" in by_code["SWA002"]["explanation"]
    assert by_code["SWA100"]["url"].endswith("/SWA100.md")
