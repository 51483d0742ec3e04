"""``--swa-sanitize-report=html``: the failure report as a page with a picture of each
violation's batch, drawn from a real violation of the reference implementation (its
``padding-not-zeroed`` switch: the graph runner leaves the padded row of the SWA write
locations as the previous batch left it), and written by the plugin beside the JUnit
report."""

from __future__ import annotations

import functools
import os
import re
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from swacheck.runtime import (
    PADDING_NOT_ZEROED,
    SWA_KV_CORRUPTION,
    SWA_LOC_MISTRANSLATED,
    Sanitizer,
    SanitizerReport,
)
from swacheck.runtime.html_report import render
from swacheck.runtime.violations import UNKNOWN, Violation

pytest_plugins = ["pytester"]
# The reference implementation's device: its Triton kernels run compiled on a GPU, under
# the interpreter on the CPU (conftest.py sets TRITON_INTERPRET there).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
SVG = "{http://www.w3.org/2000/svg}"


@functools.cache
def padded_replays() -> SanitizerReport:
    """The reference implementation with its padding bug, under ``full`` (which reads the
    rows where it finds a violation), nine decode steps: padded replays from the fourth."""
    from swacheck.reference_impl.demo import build_runner, serve

    runner = build_runner(DEVICE, inject_bug="padding-not-zeroed")
    with Sanitizer(level="full", action="log") as san:
        san.watch_pool(runner.token_to_kv_pool)
        san.watch_backend(runner.attn_backend)
        san.watch_graph_runner(runner.graph_runner)
        san.watch_model_runner(runner)
        serve(runner, 9)
        return san.report()


def svgs(page: str) -> list[ET.Element]:
    """Every picture of the page, parsed as XML (so each is well-formed SVG)."""
    return [ET.fromstring(m) for m in re.findall(r"<svg .*?</svg>", page, re.S)]


def cells(svg: ET.Element, kind: str) -> list[ET.Element]:
    return [r for r in svg.iter(f"{SVG}rect") if kind in r.get("class", "").split()]


def texts(svg: ET.Element, kind: str | None = None) -> list[str]:
    return [
        t.text or ""
        for t in svg.iter(f"{SVG}text")
        if kind is None or kind in t.get("class", "").split()
    ]


def test_padded_row_drawn_from_the_reference_implementation() -> None:
    report = padded_replays()
    kinds = {v.kind for v in report.violations}
    # The padded row is found where the graph's buffer is checked at replay; without CUDA
    # graphs the KV write runs in Python and its translation check reports it as well.
    found_at_replay = {PADDING_NOT_ZEROED, SWA_KV_CORRUPTION}
    assert found_at_replay <= kinds <= found_at_replay | {SWA_LOC_MISTRANSLATED}
    if DEVICE == "cpu":
        assert SWA_LOC_MISTRANSLATED in kinds
    page = render("report", [report.summary_line()], [("test_x", v) for v in report.violations])
    pictures = svgs(page)
    assert len(pictures) == len(report.violations)  # every violation here read its rows
    for violation, svg in zip(report.violations, pictures, strict=True):
        picture = violation.picture
        assert picture is not None
        if violation.kind == SWA_KV_CORRUPTION:
            # The slots it could write beside the one it wrote: the stale slot the padded
            # row kept, which belongs to no request of this batch.
            assert [int(t) for t in texts(svg)[1:]] == sorted({*picture.allowed, *picture.written})
            assert [int(t) for t in texts(svg) if t.isdigit() and int(t) in picture.written]
            assert len(cells(svg, "written")) == len(picture.written) >= 1
            assert not set(picture.written) & set(picture.allowed)
            continue
        rows = len(picture.actual)
        assert picture.raw is not None and 0 < picture.raw < rows
        assert len(cells(svg, "found")) == rows and len(cells(svg, "full")) == rows
        assert len(texts(svg, "padded")) == rows - picture.raw
        assert len(texts(svg, "live")) == picture.raw
        # The wrong cells are exactly the padded rows holding a stale slot: the values the
        # violation reports, where the sentinel 0 belongs.
        wrong = [i for i in range(rows) if picture.expected[i] not in (UNKNOWN, picture.actual[i])]
        assert wrong and all(i >= picture.raw for i in wrong)
        assert len(cells(svg, "wrong")) == len(wrong)
        assert all(picture.expected[i] == 0 for i in wrong)
        stale = [picture.actual[i] for i in wrong]
        assert set(stale) <= set(violation.values) | {row[3] for row in violation.rows}
        # Live rows are the translations of their full locations.
        assert all(picture.actual[i] == picture.expected[i] for i in range(picture.raw))


def test_page_stands_alone_and_escapes_engine_text() -> None:
    report = padded_replays()
    hostile = Violation(
        SWA_LOC_MISTRANSLATED,
        '<script>alert("x")</script> & co',
        "engine.py:1 in <module>",
    )
    page = render("r", ["summary <b>"], [("test_<i>", hostile), ("t", report.violations[0])])
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "<b>" not in page and "test_&lt;i&gt;" in page
    # Nothing is fetched from elsewhere: no script, image, stylesheet or font reference.
    assert not re.search(r"\b(src|href)\s*=|<script|<link|@import|url\(", page)
    assert page.count("<svg ") == 1  # the one violation with a picture


def test_clean_session_page_says_so() -> None:
    page = render("r", ["swa-sanitizer (fast): 1 test sanitized, 3 checks, 0 violations"], [])
    assert "No violations." in page and "<svg" not in page


PROJECT_TEST = """
import os

import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
from swacheck.reference_impl.demo import build_runner, serve


@pytest.mark.swa_sanitize(level="full", action="log")
def test_padded_decode(swa_sanitizer):
    runner = build_runner(DEVICE, inject_bug="padding-not-zeroed")
    swa_sanitizer.watch_pool(runner.token_to_kv_pool)
    swa_sanitizer.watch_graph_runner(runner.graph_runner)
    swa_sanitizer.watch_model_runner(runner)
    serve(runner, 9)
"""


def test_plugin_writes_the_page_beside_the_junit_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_padded=textwrap.dedent(PROJECT_TEST))
    result = pytester.runpytest_subprocess(
        "--swa-sanitize-report=html", "--junitxml=reports/junit.xml", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=1)
    page_path = Path(pytester.path, "reports", "swa-sanitizer-report.html")
    result.stdout.fnmatch_lines([f"swa-sanitizer: report written to {page_path}"])
    page = page_path.read_text(encoding="utf-8")
    assert "test_padded.py::test_padded_decode" in page
    assert PADDING_NOT_ZEROED in page and svgs(page)
    assert not [p for p in os.listdir(page_path.parent) if p.endswith(".tmp")]


def test_plugin_rejects_another_format(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("--swa-sanitize-report=pdf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--swa-sanitize-report: expected html or a PATH.html*"])
