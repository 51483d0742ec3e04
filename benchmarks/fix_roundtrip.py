"""``--fix`` on copies of real releases must never corrupt a file (issue #9).

    python benchmarks/fix_roundtrip.py sglang==0.5.11 sglang==0.5.14 [--kills 2] [--jobs 2]

For each release (downloaded at run time into the engines cache, see engines.py): copy
its package folder and, unless ``--no-styles``, rewrite every fifth file with CRLF,
CR, a BOM or a declared latin-1 encoding and give files a spread of modes, so the
guarantees are exercised on real code; one fixable file is made read-only. Then:

1. ``audit --output-format json`` records every fix's edits (the first pass's);
2. ``audit --fix --unsafe-fixes``: every file that parsed still parses (``ast``), no
   line outside an edit changed, newlines, BOM, declared encoding and mode are kept,
   and the read-only file is reported and left alone;
3. ``--fix`` again changes no byte;
4. ``--kills N`` times, on a fresh copy: a real ``--fix`` is killed with SIGKILL as
   it writes; every file must then be its old or its fixed content, whole.

Prints one JSON line per release; exit 1 if any guarantee failed.
"""

from __future__ import annotations

import argparse
import ast
import codecs
import collections
import difflib
import json
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from engines import ensure

STYLES = ("lf", "crlf", "cr", "bom", "latin-1")
MODES = (0o644, 0o600, 0o755, 0o640)


def parses(data: bytes) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(data)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def restyle(data: bytes, style: str) -> bytes:
    """``data`` with other line endings, a BOM or a latin-1 declaration (when it fits)."""
    if style == "crlf":
        return data.replace(b"\n", b"\r\n")
    if style == "cr":
        return data.replace(b"\n", b"\r")
    if style == "bom" and not data.startswith(codecs.BOM_UTF8):
        return codecs.BOM_UTF8 + data
    if style == "latin-1" and not re.match(rb"(#[^\n]*\n)?#.*coding[:=]", data):
        try:
            text = data.decode("utf-8")
            return ("# -*- coding: latin-1 -*-\n" + text).encode("latin-1")
        except UnicodeError:
            pass
    return data


def newline_kinds(data: bytes) -> set[bytes]:
    crlf = data.count(b"\r\n")
    kinds = {b"\r\n"} if crlf else set()
    kinds |= {b"\n"} if data.count(b"\n") > crlf else set()
    kinds |= {b"\r"} if data.count(b"\r") > crlf else set()
    return kinds


def declared(data: bytes) -> tuple[bool, bytes]:
    """Whether there is a BOM, and the coding declaration: what --fix must keep."""
    head = b"".join(data.splitlines(keepends=True)[:2])
    match = re.search(rb"coding[:=]\s*([-\w.]+)", head)
    return data.startswith(codecs.BOM_UTF8), match.group(1) if match else b""


def changed_rows(before: bytes, after: bytes) -> set[int]:
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    rows: set[int] = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            rows.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    return rows


def prepare(source: Path, tree: Path, styles: bool) -> dict[Path, str]:
    """Copy ``source`` to ``tree``, restyled; the style each file got."""
    shutil.copytree(source, tree)
    given = {}
    for i, path in enumerate(sorted(tree.rglob("*.py"))):
        style = STYLES[(i // 5) % len(STYLES)] if styles and i % 5 == 0 else "lf"
        data = path.read_bytes()
        restyled = restyle(data, style)
        path.write_bytes(restyled)
        given[path] = style if restyled != data else "lf"
        if styles:
            path.chmod(MODES[i % len(MODES)])
    return given


def swacheck(tree: Path, config: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "swacheck",
        "audit",
        "--exit-zero",
        "--no-cache",
        "--config",
        str(config),
        *args,
        str(tree),
    ]


def run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True)


def edit_rows(tree: Path, config: Path, extra: list[str]) -> dict[Path, set[int]]:
    proc = run(swacheck(tree, config, "--output-format", "json", *extra))
    rows: dict[Path, set[int]] = {}
    for finding in json.loads(proc.stdout):
        for edit in finding["fix"]["edits"] if finding["fix"] else ():
            span = range(edit["location"]["row"], edit["end_location"]["row"] + 1)
            rows.setdefault(Path(finding["filename"]).resolve(), set()).update(span)
    return rows


def kill_mid_fix(command: list[str], watched: list[Path]) -> dict[Path, bytes] | None:
    """Start ``command``, SIGKILL it once it has replaced a file; what is on disk then."""
    inodes = {p: p.stat().st_ino for p in watched}
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None:
        if any(p.stat().st_ino != inodes[p] for p in watched):
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.001)
    proc.wait()
    if proc.returncode != -signal.SIGKILL:
        return None
    return {p: p.read_bytes() for p in watched}


def roundtrip(spec: str, args: argparse.Namespace, extra: list[str]) -> dict[str, object]:
    name, _, version = spec.partition("==")
    source = ensure(name, version)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tree, config = Path(tmp) / name, Path(tmp) / "swacheck.toml"
        config.write_text("[tool.swacheck]\n")
        styles = prepare(source, tree, not args.no_styles)
        files = sorted(tree.rglob("*.py"))
        before = {p: p.read_bytes() for p in files}
        modes = {p: stat.S_IMODE(p.stat().st_mode) for p in files}
        rows = edit_rows(tree, config, extra)
        fixable = sorted(rows)
        read_only = fixable[len(fixable) // 2] if fixable else None
        if read_only is not None:
            read_only.chmod(0o444)
            modes[read_only] = 0o444

        first = run(swacheck(tree, config, "--fix", "--unsafe-fixes", *extra))
        after = {p: p.read_bytes() for p in files}
        changed = [p for p in files if after[p] != before[p]]
        problems: dict[str, list[str]] = {
            k: [] for k in ("broken", "outside_edits", "newlines", "encoding", "mode")
        }
        for path in changed:
            shown = str(path.relative_to(tree))
            if parses(before[path]) and not parses(after[path]):
                problems["broken"].append(shown)
            if changed_rows(before[path], after[path]) - rows.get(path.resolve(), set()):
                problems["outside_edits"].append(shown)
            if newline_kinds(after[path]) != newline_kinds(before[path]):
                problems["newlines"].append(shown)
            if declared(after[path]) != declared(before[path]):
                problems["encoding"].append(shown)
        problems["mode"] = [str(p) for p in files if stat.S_IMODE(p.stat().st_mode) != modes[p]]
        second = run(swacheck(tree, config, "--fix", "--unsafe-fixes", *extra))
        again = {p: p.read_bytes() for p in files}
        # The summary line: "Found N findings (M fixed, K remaining)."
        fixed_count = re.search(r"\((\d+) fixed, ", first.stdout + first.stderr)
        row: dict[str, object] = {
            "release": spec,
            "files": len(files),
            "files_fixed": len(changed),
            "fixes_applied": int(fixed_count.group(1)) if fixed_count else 0,
            "fixed_by_style": dict(collections.Counter(styles[p] for p in changed)),
            **{f"{k}_after_fix": v for k, v in problems.items()},
            "second_fix_changed": [str(p.relative_to(tree)) for p in files if again[p] != after[p]],
            "read_only_reported": read_only is None
            or (
                after[read_only] == before[read_only]
                and f"{read_only.name}: cannot write fix: file is read-only" in first.stderr
            ),
            "internal_errors": (first.stderr + second.stderr).count("internal error"),
        }

        kills = []
        for k in range(args.kills if changed else 0):  # nothing written: nothing to kill
            fresh = Path(tmp) / f"kill{k}"
            prepare(source, fresh, not args.no_styles)
            watched = [fresh / p.relative_to(tree) for p in changed]
            command = swacheck(fresh, config, "--fix", "--unsafe-fixes", *extra)
            on_disk = kill_mid_fix(command, watched)
            if on_disk is None:
                kills.append({"killed": False})
                continue
            old = sum(on_disk[fresh / p.relative_to(tree)] == before[p] for p in changed)
            new = sum(on_disk[fresh / p.relative_to(tree)] == after[p] for p in changed)
            kills.append({"killed": True, "old": old, "new": new, "torn": len(changed) - old - new})
            shutil.rmtree(fresh)
        row["kills"] = kills
    row["seconds"] = round(time.perf_counter() - started, 1)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("releases", nargs="+")
    parser.add_argument("--select", default="")
    parser.add_argument("--kills", type=int, default=1, help="SIGKILLed --fix runs per release")
    parser.add_argument("--no-styles", action="store_true", help="keep the files as released")
    parser.add_argument("--jobs", default="0")
    parser.add_argument(
        "--markdown", action="store_true", help="after the JSON lines, the docs' table of them"
    )
    args = parser.parse_args()
    extra = ["--jobs", args.jobs] + (["--select", args.select] if args.select else [])
    ok = True
    rows = []
    for spec in args.releases:
        row = roundtrip(spec, args, extra)
        rows.append(row)
        ok &= not any(row[f"{k}_after_fix"] for k in ("broken", "outside_edits"))
        ok &= not any(row[f"{k}_after_fix"] for k in ("newlines", "encoding", "mode"))
        ok &= not row["second_fix_changed"] and not row["internal_errors"]
        ok &= bool(row["read_only_reported"])
        ok &= all(k.get("killed") and not k["torn"] for k in row["kills"])  # type: ignore[union-attr]
        print(json.dumps(row), flush=True)
    if args.markdown:
        print(markdown(rows))
    return 0 if ok else 1


def markdown(rows: list[dict[str, object]]) -> str:
    """The round-trip table of docs/real-world.md."""
    lines = [
        "| release | files | files fixed | fixes | broken | outside edits | 2nd run changed "
        "| killed mid-write: torn files | internal errors |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        torn = sum(k.get("torn", 0) for k in r["kills"])  # type: ignore[union-attr]
        killed = sum(bool(k.get("killed")) for k in r["kills"])  # type: ignore[union-attr]
        lines.append(
            f"| {r['release'].replace('==', ' ')} | {r['files']:,} | {r['files_fixed']} "
            f"| {r['fixes_applied']} | {len(r['broken_after_fix'])} "  # type: ignore[arg-type]
            f"| {len(r['outside_edits_after_fix'])} | {len(r['second_fix_changed'])} "  # type: ignore[arg-type]
            f"| {f'{torn} of {killed} runs' if killed else 'nothing written'} "
            f"| {r['internal_errors']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
