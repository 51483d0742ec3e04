"""The command line contract of DESIGN.md, exercised through real subprocesses."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

INT64_SWA = (
    "import torch\n\nout_cache_loc_swa = torch.zeros((8,), dtype=torch.int64)\n"
    "\n\ndef set_kv_buffer(layer, swa_loc, cache_k, cache_v):\n"
    "    assert swa_loc.dtype == torch.int32  # the KV store takes int32: a safe fix\n"
)


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_clean_tree_exits_zero(swacheck, tmp_path: Path) -> None:
    write(tmp_path / "ok.py", "swa_loc = torch.zeros(4, dtype=torch.int32)\n")
    proc = swacheck("audit", ".", check_rc=0)
    assert proc.stdout == "All checks passed!\n"


def test_text_output_is_path_line_col_code(swacheck, tmp_path: Path) -> None:
    write(tmp_path / "pkg" / "bufs.py", INT64_SWA)
    proc = swacheck("audit", check_rc=1)
    assert proc.stdout.startswith(f"pkg{os.sep}bufs.py:3:45: SWA002 [*] SWA write location ")
    assert proc.stdout.splitlines()[1:] == ["Found 1 finding.", "[*] 1 fixable with `--fix`."]


def test_json_output_has_ruff_fields(swacheck, tmp_path: Path) -> None:
    write(tmp_path / "bufs.py", INT64_SWA)
    proc = swacheck("audit", "--output-format", "json", check_rc=1)
    [item] = json.loads(proc.stdout)
    assert list(item) == [  # ruff's fields, in ruff's order (test_cli_formats.py: its shape)
        "cell",
        "code",
        "end_location",
        "filename",
        "fix",
        "location",
        "message",
        "name",
        "noqa_row",
        "severity",
        "url",
    ]
    assert item["code"] == "SWA002"
    assert item["filename"] == str(tmp_path / "bufs.py")
    assert item["location"] == {"row": 3, "column": 45}
    assert item["end_location"] == {"row": 3, "column": 56}
    assert item["noqa_row"] == 3
    assert item["fix"]["applicability"] == "safe"
    [edit] = item["fix"]["edits"]
    assert edit["content"] == "torch.int32"


def test_github_annotations(swacheck, tmp_path: Path) -> None:
    write(tmp_path / "bufs.py", INT64_SWA)
    proc = swacheck("audit", "--output-format", "github", check_rc=1)
    assert proc.stdout.startswith(
        f"::error title=swacheck (SWA002),file={tmp_path / 'bufs.py'},line=3,col=45,"
    )
    assert "endColumn=56::bufs.py:3:45: SWA002 SWA write location" in proc.stdout


def test_sarif_is_valid_2_1_0(swacheck, tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    write(tmp_path / "bufs.py", INT64_SWA)
    write(tmp_path / "broken.py", "def (:  # swa\n")
    proc = swacheck("audit", "--output-format", "sarif", check_rc=1)
    document = json.loads(proc.stdout)
    schema = json.loads((Path(__file__).parent / "sarif_2_1_0_required.json").read_text())
    jsonschema.validate(document, schema)
    results = document["runs"][0]["results"]
    assert sorted(r["ruleId"] for r in results) == ["SWA002", "SWA999"]
    rules = document["runs"][0]["tool"]["driver"]["rules"]
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]


def test_parse_error_is_a_finding_and_the_audit_goes_on(swacheck, tmp_path: Path) -> None:
    write(tmp_path / "a_broken.py", "def f(:\n    swa_loc = 1\n")
    write(tmp_path / "b_nul.py", b"swa_loc = 1\n\x00\n")
    write(tmp_path / "c_latin.py", b"# -*- coding: utf-8 -*-\nswa_loc = '\xff'\n")
    write(tmp_path / "d_bufs.py", INT64_SWA)
    proc = swacheck("audit", "--output-format", "json", check_rc=1)
    found = sorted((Path(f["filename"]).name, f["code"]) for f in json.loads(proc.stdout))
    assert found == [
        ("a_broken.py", "SWA999"),
        ("b_nul.py", "SWA999"),
        ("c_latin.py", "SWA999"),
        ("d_bufs.py", "SWA002"),
    ]
    assert "NUL byte" in proc.stdout and "decode" in proc.stdout


def test_parse_error_only_where_a_rule_could_fire(swacheck, tmp_path: Path) -> None:
    """No rule can fire in a file without trigger strings, prefilter or not."""
    write(tmp_path / "unrelated.py", "def f(:\n")
    swacheck("audit", check_rc=0)
    swacheck("audit", "--no-prefilter", check_rc=0)


def test_declared_latin1_encoding_parses(swacheck, tmp_path: Path) -> None:
    write(tmp_path / "latin.py", b"# -*- coding: latin-1 -*-\nname = '\xff'\n" + INT64_SWA.encode())
    proc = swacheck("audit", "--output-format", "json", check_rc=1)
    assert [f["code"] for f in json.loads(proc.stdout)] == ["SWA002"]


def test_unknown_select_is_a_usage_error(swacheck, tmp_path: Path) -> None:
    write(tmp_path / "bufs.py", INT64_SWA)
    proc = swacheck("audit", "--select", "NOPE", check_rc=2)
    assert "NOPE" in proc.stderr


def test_select_and_ignore(swacheck, tmp_path: Path) -> None:
    write(tmp_path / "bufs.py", INT64_SWA)
    swacheck("audit", "--select", "SWA002", check_rc=1)
    swacheck("audit", "--ignore", "SWA002", check_rc=0)
    swacheck("audit", "--select", "SWA00", "--ignore", "SWA0", check_rc=0)


def test_exit_zero(swacheck, tmp_path: Path) -> None:
    write(tmp_path / "bufs.py", INT64_SWA)
    proc = swacheck("audit", "--exit-zero", check_rc=0)
    assert "SWA002" in proc.stdout


def test_noqa_suppresses_on_the_flagged_line(swacheck, tmp_path: Path) -> None:
    write(tmp_path / "a.py", INT64_SWA.replace("int64)", "int64)  # noqa: SWA002"))
    write(tmp_path / "b.py", INT64_SWA.replace("int64)", "int64)  # noqa"))
    write(tmp_path / "c.py", INT64_SWA.replace("int64)", "int64)  # noqa: SWA001"))
    write(tmp_path / "d.py", INT64_SWA + "s = '# noqa'\n")
    proc = swacheck("audit", "--quiet", check_rc=1)
    assert sorted(line.split(":")[0] for line in proc.stdout.splitlines()) == ["c.py", "d.py"]


class TestConfiguration:
    def test_unknown_key_names_the_key(self, swacheck, tmp_path: Path) -> None:
        write(tmp_path / "pyproject.toml", "[tool.swacheck]\nmaping-attributes = ['m']\n")
        proc = swacheck("audit", check_rc=2)
        assert "maping-attributes" in proc.stderr

    def test_wrong_type_names_key_and_reason(self, swacheck, tmp_path: Path) -> None:
        write(tmp_path / "pyproject.toml", "[tool.swacheck]\nselect = 'SWA002'\n")
        proc = swacheck("audit", check_rc=2)
        assert "select: expected a list of strings" in proc.stderr

    def test_bad_dtype_value(self, swacheck, tmp_path: Path) -> None:
        write(tmp_path / "pyproject.toml", "[tool.swacheck]\nswa-loc-dtype = 'int16'\n")
        assert "swa-loc-dtype" in swacheck("audit", check_rc=2).stderr

    def test_malformed_toml(self, swacheck, tmp_path: Path) -> None:
        write(tmp_path / "pyproject.toml", "[tool.swacheck\n")
        assert "not valid TOML" in swacheck("audit", check_rc=2).stderr

    def test_found_upward_and_applied(self, swacheck, swacheck_at, tmp_path: Path) -> None:
        write(tmp_path / "pyproject.toml", "[tool.swacheck]\nignore = ['SWA002']\n")
        write(tmp_path / "sub" / "bufs.py", INT64_SWA)
        sub = swacheck_at(tmp_path / "sub")
        sub("audit", ".", check_rc=0)
        sub("audit", ".", "--select", "SWA002", check_rc=0)

    def test_custom_names(self, swacheck, tmp_path: Path) -> None:
        write(
            tmp_path / "pyproject.toml",
            "[tool.swacheck]\nswa-loc-dtype = 'int64'\n",
        )
        write(tmp_path / "bufs.py", "self.swa_loc = loc.int()\n")
        proc = swacheck("audit", check_rc=1)
        assert "torch.int64" in proc.stdout

    def test_per_file_ignores(self, swacheck, tmp_path: Path) -> None:
        write(
            tmp_path / "pyproject.toml",
            "[tool.swacheck]\n[tool.swacheck.per-file-ignores]\n'legacy/*.py' = ['SWA002']\n",
        )
        write(tmp_path / "legacy" / "bufs.py", INT64_SWA)
        write(tmp_path / "new" / "bufs.py", INT64_SWA)
        proc = swacheck("audit", check_rc=1)
        assert proc.stdout.startswith(f"new{os.sep}bufs.py")
        assert "legacy" not in proc.stdout

    def test_explicit_config_file(self, swacheck, tmp_path: Path) -> None:
        write(tmp_path / "other.toml", "[tool.swacheck]\nignore = ['SWA002']\n")
        write(tmp_path / "bufs.py", INT64_SWA)
        swacheck("audit", "--config", "other.toml", check_rc=0)


class TestDiscovery:
    def test_gitignore_and_exclude(self, swacheck, tmp_path: Path) -> None:
        (tmp_path / ".git").mkdir()
        write(tmp_path / ".gitignore", "generated/\n*_pb2.py\n")
        write(tmp_path / "pyproject.toml", "[tool.swacheck]\nextend-exclude = ['vendor']\n")
        for name in ("generated/a.py", "x_pb2.py", "vendor/b.py", "build/c.py", "keep.py"):
            write(tmp_path / name, INT64_SWA)
        proc = swacheck("audit", "-q", check_rc=1)
        assert [line.split(":")[0] for line in proc.stdout.splitlines()] == ["keep.py"]

    def test_explicit_file_is_audited_even_if_excluded(self, swacheck, tmp_path: Path) -> None:
        write(tmp_path / "pyproject.toml", "[tool.swacheck]\nextend-exclude = ['vendor']\n")
        write(tmp_path / "vendor" / "b.py", INT64_SWA)
        swacheck("audit", check_rc=0)
        swacheck("audit", "vendor/b.py", check_rc=1)

    def test_symlinks_are_not_followed(self, swacheck, swacheck_at, tmp_path: Path) -> None:
        outside = tmp_path.parent / f"{tmp_path.name}-outside"
        write(outside / "bufs.py", INT64_SWA)
        tree = tmp_path / "tree"
        write(tree / "ok.py", "x = 1\n")
        (tree / "link_dir").symlink_to(outside, target_is_directory=True)
        (tree / "link_file.py").symlink_to(outside / "bufs.py")
        (tree / "loop").symlink_to(tree, target_is_directory=True)
        swacheck_at(tree)("audit", ".", check_rc=0)

    def test_missing_path_is_a_finding(self, swacheck) -> None:
        """A typo'd path fails the run, as ruff's E902 does."""
        proc = swacheck("audit", "nope.py", check_rc=1)
        assert proc.stdout.startswith("nope.py:1:1: SWA999 File could not be read (No such file")
        listed = swacheck("audit", "nope.py", "--output-format", "json", check_rc=1).stdout
        assert [f["code"] for f in json.loads(listed)] == ["SWA999"]


class TestFix:
    def test_fix_rewrites_and_is_idempotent(self, swacheck, tmp_path: Path) -> None:
        target = write(tmp_path / "bufs.py", INT64_SWA)
        target.chmod(0o640)
        swacheck("audit", "--fix", check_rc=0)
        assert target.read_text() == INT64_SWA.replace("int64", "int32")
        assert stat.S_IMODE(target.stat().st_mode) == 0o640
        before = target.stat().st_mtime_ns
        swacheck("audit", "--fix", check_rc=0)
        assert target.stat().st_mtime_ns == before
        left = sorted(p.name for p in tmp_path.iterdir())
        assert left == [".swacheck_cache", "bufs.py"]  # no temporary files left behind

    def test_fix_keeps_crlf_and_encoding(self, swacheck, tmp_path: Path) -> None:
        source = ("# -*- coding: latin-1 -*-\nname = '\xe9'\n" + INT64_SWA).replace("\n", "\r\n")
        target = write(tmp_path / "bufs.py", source.encode("latin-1"))
        swacheck("audit", "--fix", check_rc=0)
        assert target.read_bytes() == source.replace("int64", "int32").encode("latin-1")

    def test_fix_keeps_bom(self, swacheck, tmp_path: Path) -> None:
        target = write(tmp_path / "bufs.py", b"\xef\xbb\xbf" + INT64_SWA.encode())
        swacheck("audit", "--fix", check_rc=0)
        assert target.read_bytes() == b"\xef\xbb\xbf" + INT64_SWA.replace("int64", "int32").encode()

    def test_unsafe_fix_needs_the_flag(self, swacheck, tmp_path: Path) -> None:
        source = (
            "def swa_slots(self, i):\n"
            "    swa_slots = self.full_to_swa_index_mapping[i]\n"
            "    return swa_slots\n"
        )
        target = write(tmp_path / "pool.py", source)
        swacheck("audit", "--fix", check_rc=1)
        assert target.read_text() == source
        swacheck("audit", "--fix", "--unsafe-fixes", check_rc=0)
        assert "self.full_to_swa_index_mapping[i].to(torch.int32)" in target.read_text()

    def test_diff_writes_nothing(self, swacheck, tmp_path: Path) -> None:
        target = write(tmp_path / "bufs.py", INT64_SWA)
        proc = swacheck("audit", "--diff", check_rc=1)
        assert "-out_cache_loc_swa = torch.zeros((8,), dtype=torch.int64)" in proc.stdout
        assert "+out_cache_loc_swa = torch.zeros((8,), dtype=torch.int32)" in proc.stdout
        assert target.read_text() == INT64_SWA

    def test_read_only_file_is_reported_not_crashed(self, swacheck, tmp_path: Path) -> None:
        if os.geteuid() == 0:
            pytest.skip("root can write into read-only folders")
        folder = tmp_path / "ro"
        target = write(folder / "bufs.py", INT64_SWA)
        folder.chmod(0o555)
        try:
            proc = swacheck("audit", "--fix", check_rc=1)
            assert "cannot write fix" in proc.stderr
            assert target.read_text() == INT64_SWA
        finally:
            folder.chmod(0o755)


def test_statistics(swacheck, tmp_path: Path) -> None:
    write(tmp_path / "a.py", INT64_SWA)
    write(tmp_path / "b.py", INT64_SWA)
    proc = swacheck("audit", "--statistics", check_rc=1)
    lines = proc.stdout.splitlines()
    assert lines[0] == "2\tSWA002\t[*] swa-loc-int64"
    # Rules that did not apply (no translation cache in this tree) are named, not counted.
    assert lines[1].startswith("-\tSWA001\tinactive: ")
    assert lines[-2:] == ["Found 2 findings.", "[*] 2 fixable with `--fix`."]
    assert not any(": SWA" in line for line in lines)


def test_rule_and_rules_commands(swacheck) -> None:
    rules = swacheck("rules", check_rc=0).stdout
    assert "SWA002  swa-loc-int64" in rules
    page = swacheck("rule", "swa002", check_rc=0).stdout
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Fix safety"):
        assert section in page
    assert "#23552" in page
    assert swacheck("rule", "SWA404", check_rc=2).stderr


def test_version(swacheck) -> None:
    from swacheck import __version__

    assert swacheck("--version", check_rc=0).stdout.strip() == f"swacheck {__version__}"


def test_parallel_equals_serial(swacheck, tmp_path: Path) -> None:
    for i in range(40):
        write(tmp_path / f"m{i:02}.py", INT64_SWA if i % 3 else "swa_loc = 1\n")
    write(tmp_path / "broken.py", "def (:  # swa\n")
    serial = swacheck("audit", "--jobs", "1", "--output-format", "json", check_rc=1).stdout
    parallel = swacheck("audit", "--jobs", "2", "--output-format", "json", check_rc=1).stdout
    assert serial == parallel
    assert len(json.loads(serial)) == 26 + 1


def test_prefilter_does_not_change_findings(swacheck, swacheck_at) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    runner = swacheck_at(examples)
    with_filter = runner("audit", ".", "--output-format", "json").stdout
    without = runner("audit", ".", "--no-prefilter", "--output-format", "json").stdout
    assert json.loads(with_filter) == json.loads(without)
    assert json.loads(with_filter)


class TestCache:
    def test_a_parallel_run_caches_facts_and_findings_of_every_file(
        self, swacheck, tmp_path: Path
    ) -> None:
        # Worker processes check the files; the parent must still cache their findings.
        for i in range(30):
            write(tmp_path / f"m{i:02}.py", INT64_SWA)
        cold = swacheck("audit", "--jobs", "2", "--output-format", "json", check_rc=1).stdout
        entries = [p for p in (tmp_path / ".swacheck_cache").rglob("*") if p.is_file()]
        # Findings per file; the rule catalogue, the inventory, the facts of all files
        # (one entry), the rules' activation and the run's record.
        assert len([p for p in entries if p.name not in (".gitignore", "CACHEDIR.TAG")]) == 30 + 5
        warm = swacheck("audit", "--jobs", "2", "--output-format", "json", check_rc=1).stdout
        assert warm == cold
        # A new file misses the run record: every other file's entries are hits.
        write(tmp_path / "new.py", INT64_SWA)
        again = swacheck("audit", "--jobs", "2", "--output-format", "json", check_rc=1).stdout
        assert len(json.loads(again)) == len(json.loads(cold)) + 1

    def test_cache_is_git_ignored_and_gives_the_same_findings(
        self, swacheck, tmp_path: Path
    ) -> None:
        write(tmp_path / "bufs.py", INT64_SWA)
        cold = swacheck("audit", "--output-format", "json", check_rc=1).stdout
        assert (tmp_path / ".swacheck_cache" / ".gitignore").read_text().splitlines()[-1] == "*"
        warm = swacheck("audit", "--output-format", "json", check_rc=1).stdout
        uncached = swacheck("audit", "--no-cache", "--output-format", "json", check_rc=1).stdout
        assert cold == warm == uncached

    def test_changed_file_is_audited_again(self, swacheck, tmp_path: Path) -> None:
        target = write(tmp_path / "bufs.py", INT64_SWA)
        swacheck("audit", check_rc=1)
        target.write_text(INT64_SWA.replace("int64", "int32"))
        swacheck("audit", check_rc=0)

    def test_cache_dir_is_configurable(self, swacheck, tmp_path: Path) -> None:
        write(tmp_path / "pyproject.toml", "[tool.swacheck]\ncache-dir = 'build/swc'\n")
        write(tmp_path / "bufs.py", INT64_SWA)
        swacheck("audit", "bufs.py", check_rc=1)
        assert (tmp_path / "build" / "swc" / ".gitignore").exists()
        assert not (tmp_path / ".swacheck_cache").exists()

    def test_no_cache_writes_nothing(self, swacheck, tmp_path: Path) -> None:
        write(tmp_path / "bufs.py", INT64_SWA)
        swacheck("audit", "--no-cache", check_rc=1)
        assert not (tmp_path / ".swacheck_cache").exists()


def test_bundled_examples_show_every_rule(swacheck_at) -> None:
    """The quick start audits examples/: each rule must have its seed bug there."""
    from swacheck.rules import all_rules

    examples = Path(__file__).resolve().parents[2] / "examples"
    proc = swacheck_at(examples)("audit", ".", "--no-cache", "--output-format", "json", check_rc=1)
    found = {f["code"] for f in json.loads(proc.stdout)}
    assert found == {rule.code for rule in all_rules()}
