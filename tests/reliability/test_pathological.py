"""Issue #9: pathological files each get a clear per-file answer and the run goes on.

Every input sits in one tree next to an ordinary file with a known finding; one run of
the real command must answer for each file (an SWA999 naming the reason, or the
findings a clean parse gives) in bounded time, with exit status 1 and no traceback.
Inputs too large or slow for CI (a 20 MB file with SWA code, 2000-term expressions)
are measured by benchmarks/fuzz_linter.py --pathological; see docs/reliability.md.
"""

from __future__ import annotations

import codecs
import json
import time
from pathlib import Path

from fuzzkit import INT64_SWA, Cli, source_lines, write

# A file the prefilter lets through (it names an SWA location) that holds no finding.
SWA = b"swa_loc = None\n"
BUG = INT64_SWA.encode()

# name -> (content, expected codes, words the SWA999 message must hold)
CASES: dict[str, tuple[bytes, list[str], str]] = {
    "nul.py": (SWA + b"x = 1\x00\n", ["SWA999"], "NUL byte"),
    "bom.py": (codecs.BOM_UTF8 + BUG, ["SWA002"], ""),
    "crlf.py": (BUG.replace(b"\n", b"\r\n"), ["SWA002"], ""),
    "cr.py": (BUG.replace(b"\n", b"\r"), ["SWA002"], ""),
    "bom_crlf.py": (codecs.BOM_UTF8 + BUG.replace(b"\n", b"\r\n"), ["SWA002"], ""),
    "no_final_newline.py": (BUG.rstrip(), ["SWA002"], ""),
    "form_feed.py": (b"\x0c" + SWA + b"\x0cx = 1\n", [], ""),
    "empty.py": (b"", [], ""),
    "latin1.py": (b"# -*- coding: latin-1 -*-\nname = '\xe9'\n" + BUG, ["SWA002"], ""),
    "cp1252.py": (b"# coding: cp1252\nname = '\x93q\x94'\n" + BUG, ["SWA002"], ""),
    # CPython finds the declaration in the first two lines, whatever ends them, and reads
    # a first line that is a comment in any bytes; ``tokenize`` and libcst did not.
    "latin1_cr.py": (
        b"# -*- coding: latin-1 -*-\rname = '\xe9'\r" + BUG.replace(b"\n", b"\r"),
        ["SWA002"],
        "",
    ),
    "latin1_declared_after_latin1_comment.py": (
        b"# caf\xe9\n# -*- coding: latin-1 -*-\nname = '\xe9'\n" + BUG,
        ["SWA002"],
        "",
    ),
    "cp1252_cr_after_shebang.py": (
        b"#!/usr/bin/env python\r# coding: cp1252\rname = '\x93'\r" + BUG.replace(b"\n", b"\r"),
        ["SWA002"],
        "",
    ),
    # CPython never decodes a UTF-8 file's comments: other bytes there pass.
    "latin1_bytes_in_a_comment.py": (b"# caf\xe9\n" + BUG, ["SWA002"], ""),
    "declared_on_the_third_line.py": (
        b"#!/usr/bin/env python\n#\n# coding: latin-1\n" + SWA + b"name = '\xe9'\n",
        ["SWA999"],
        "decode",
    ),
    "unknown_encoding.py": (b"# -*- coding: klingon -*-\n" + SWA, ["SWA999"], "unknown encoding"),
    "utf16_declared.py": (b"# -*- coding: utf-16 -*-\n" + SWA, ["SWA999"], ""),
    "undeclared_latin1.py": (SWA + b"name = '\xff'\n", ["SWA999"], "decode"),
    "bom_vs_latin1.py": (
        codecs.BOM_UTF8 + b"# -*- coding: latin-1 -*-\n" + SWA,
        ["SWA999"],
        "encoding",
    ),
    "lone_surrogate.py": (SWA + b"name = '\xed\xa0\x80'\n", ["SWA999"], "decode"),
    "py2_print.py": (SWA + b"print 'hello'\n", ["SWA999"], "syntax error"),
    # Python 3.14 reads ``except E, e:`` as ``except (E, e):`` (PEP 758), and so does libcst.
    "py2_except.py": (SWA + b"try:\n    pass\nexcept E, e:\n    pass\n", [], ""),
    "py2_octal.py": (SWA + b"mode = 0777\n", ["SWA999"], "syntax error"),
    "py2_backticks.py": (SWA + b"s = `swa_loc`\n", ["SWA999"], "syntax error"),
    "py2_exec_raise.py": (SWA + b"exec 'x = 1'\nraise E, 'm'\n", ["SWA999"], "syntax error"),
    "mixed_tabs.py": (SWA + b"if x:\n\tif y:\n        z = 1\n", ["SWA999"], "tabs"),
    "line_100k_comment.py": (BUG + b"# " + b"x" * 100_000 + b"\n", ["SWA002"], ""),
    "line_100k_string.py": (b"swa_name = '" + b"x" * 100_000 + b"'\n" + BUG, ["SWA002"], ""),
    "nested_lists_100.py": (SWA + b"x = " + b"[" * 100 + b"]" * 100 + b"\n", [], ""),
    "nested_ifs_100.py": (
        SWA + b"".join(b" " * i + b"if x:\n" for i in range(100)) + b" " * 100 + b"y\n",
        ["SWA999"],
        "indentation",
    ),
    "strings_3000.py": (SWA + b"x = (\n" + b"    'x'\n" * 3000 + b")\n", [], ""),
    # libcst parses trailer chains in quadratic time, in native code no timer can stop:
    # beyond 200 links in a row the file is not handed to it (150 are parsed).
    "attribute_chain_5000.py": (SWA + b"x = a" + b".b" * 5000 + b"\n", ["SWA999"], "chain"),
    "call_chain_3000.py": (SWA + b"x = f" + b"()" * 3000 + b"\n", ["SWA999"], "analyse"),
    "subscript_chain_2000.py": (SWA + b"x = a" + b"[0]" * 2000 + b"\n", ["SWA999"], "analyse"),
    "attribute_chain_150.py": (BUG + b"x = a" + b".b" * 150 + b"\n", ["SWA002"], ""),
    # 20 MB: over max-file-size, so not even read (stat first); any rule could fire in it.
    "huge_without_swa.py": (
        b"def helper(x):\n    return x + 1\n\n" * 640_000,
        ["SWA999"],
        "too large to analyse",
    ),
}


def _by_file(findings: list[dict]) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for finding in findings:
        grouped.setdefault(Path(finding["filename"]).name, []).append(finding)
    return grouped


def test_each_pathological_file_gets_a_clear_answer(cli: Cli, tmp_path: Path) -> None:
    for name, (content, _, _) in CASES.items():
        write(tmp_path / name, content)
    write(tmp_path / "zz_ordinary.py", INT64_SWA)
    started = time.perf_counter()
    proc = cli("audit", "--no-cache", "--output-format", "json", check_rc=1, timeout=120)
    elapsed = time.perf_counter() - started
    found = _by_file(json.loads(proc.stdout))
    assert [f["code"] for f in found.pop("zz_ordinary.py")] == ["SWA002"]
    wrong = {}
    for name, (content, codes, words) in CASES.items():
        findings = found.pop(name, [])
        lines = source_lines(content)
        if sorted(f["code"] for f in findings) != codes:
            wrong[name] = [(f["code"], f["message"]) for f in findings]
        for finding in findings:
            row, column = finding["location"]["row"], finding["location"]["column"] - 1
            if finding["code"] == "SWA999" and words.lower() not in finding["message"].lower():
                wrong[name] = f"unclear: {finding['message']}"
            if finding["code"] != "SWA999" and not (
                row <= len(lines) and column <= len(lines[row - 1])
            ):
                wrong[name] = f"position {row}:{column} outside the file"
    assert wrong == {}
    assert found == {}
    assert "internal error" not in proc.stderr
    assert elapsed < 90


def _deep_tree(tmp_path: Path, content: bytes) -> None:
    write(tmp_path / "deep.py", content)
    write(tmp_path / "zz_ordinary.py", INT64_SWA)


def test_brackets_nested_1500_deep_are_a_parse_error(cli: Cli, tmp_path: Path) -> None:
    _deep_tree(tmp_path, SWA + b"x = " + b"(" * 1500 + b"1" + b")" * 1500 + b"\n")
    found = _by_file(cli.json("--no-cache", timeout=60))
    assert [f["code"] for f in found["deep.py"]] == ["SWA999"]
    assert [f["code"] for f in found["zz_ordinary.py"]] == ["SWA002"]


def test_a_1500_term_expression_in_a_method_does_not_end_the_run(cli: Cli, tmp_path: Path) -> None:
    expression = b" + ".join([b"a"] * 1500)
    _deep_tree(
        tmp_path,
        b"class Pool:\n    def invalidate_loc_cache(self):\n        pass\n\n"
        b"    def step(self):\n        self.swa_loc = " + expression + b"\n",
    )
    found = _by_file(cli.json("--no-cache", timeout=60))
    assert [f["code"] for f in found["zz_ordinary.py"]] == ["SWA002"]
    assert [f["code"] for f in found.get("deep.py", [])] in ([], ["SWA999"])


def test_noqa_holds_in_every_newline_style(cli: Cli, tmp_path: Path) -> None:
    """A lone ``\\r`` ends a line for libcst, so it must for the noqa scanner too."""
    source = (
        "import torch\n\n"
        "out_cache_loc_swa = torch.zeros((8,), dtype=torch.int64)  # noqa: SWA002\n"
        "swa_loc = torch.arange(4)\n"
    )
    for style, newline in (("lf", "\n"), ("crlf", "\r\n"), ("cr", "\r")):
        write(tmp_path / f"{style}.py", source.replace("\n", newline).encode())
    found = cli.json("--no-cache")
    assert sorted((Path(f["filename"]).name, f["location"]["row"]) for f in found) == [
        ("cr.py", 4),
        ("crlf.py", 4),
        ("lf.py", 4),
    ]


def test_a_declared_encoding_with_cr_line_ends_is_audited_fixed_and_suppressed(
    cli: Cli, tmp_path: Path
) -> None:
    """The issue's file: latin-1 declared, CR-only line ends, a non-ASCII byte. CPython
    compiles it; it got ``SWA999 cannot decode source`` and ``--fix`` did nothing."""
    head = b"# -*- coding: latin-1 -*-\rname = '\xe9'\r"
    target = write(tmp_path / "bufs.py", head + BUG.replace(b"\n", b"\r"))
    found = cli.json("--no-cache")
    assert [(f["code"], f["location"]["row"]) for f in found] == [("SWA002", 4)]
    cli("audit", "--no-cache", "--fix", "--unsafe-fixes", check_rc=0)
    assert target.read_bytes() == head + BUG.replace(b"\n", b"\r").replace(b"int64", b"int32")
    target.write_bytes(head + BUG.replace(b"\n", b"\r"))
    cli("audit", "--no-cache", "--add-noqa", check_rc=0)
    assert b"# noqa: SWA002\r" in target.read_bytes()
    assert target.read_bytes().startswith(head)
    assert cli.json("--no-cache") == []


def test_a_file_with_other_bytes_in_its_comments_is_audited_not_rewritten(
    cli: Cli, tmp_path: Path
) -> None:
    """CPython compiles a UTF-8 file whose comments hold latin-1 bytes; its findings are
    reported, and a fix or a ``# noqa`` that would rewrite bytes never decoded is refused
    with the reason (not written with U+FFFD in their place)."""
    content = b"# caf\xe9\n" + BUG
    target = write(tmp_path / "bufs.py", content)
    assert [f["code"] for f in cli.json("--no-cache")] == ["SWA002"]
    fixed = cli("audit", "--no-cache", "--fix", "--unsafe-fixes", check_rc=1)
    assert "bufs.py: fix not applied (the file's comments hold bytes that are not UTF-8" in (
        fixed.stderr
    )
    noqa = cli("audit", "--no-cache", "--add-noqa", check_rc=2)
    assert "bufs.py: no `# noqa` added: the file's comments hold bytes" in noqa.stderr
    assert target.read_bytes() == content
