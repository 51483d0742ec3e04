"""benchmarks/plot_overhead.py turns bench_sanitizer_overhead.py's result lines into an SVG
(issue 26, item 7): a well-formed document with one bar per level and group, sized by its
time, labelled with its overhead."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "plot_overhead.py"
SVG = "{http://www.w3.org/2000/svg}"


def _result(workload: str, eager: tuple[float, float, float], graph: tuple[float, float, float]):
    """A result line in bench_sanitizer_overhead.py's shape (BENCHMARKS.md's realistic row)."""

    def levels(ms: tuple[float, float, float]) -> dict:
        return {
            lv: {"median_ms": m, "added_ms": 0.0}
            for lv, m in zip(("off", "fast", "full"), ms, strict=True)
        }

    return {
        "benchmark": "sanitizer_overhead_per_decode_step",
        "workload": workload,
        "ms_per_step": {"eager": levels(eager), "graph": levels(graph)},
    }


def test_the_svg_has_a_bar_per_level_sized_by_its_time(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text(
        "progress noise on stdout\n"
        + json.dumps(_result("realistic", (54.874, 55.704, 58.443), (18.162, 18.258, 19.273)))
        + "\n"
    )
    out = tmp_path / "overhead.svg"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(results), "-o", str(out)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    root = ET.fromstring(out.read_text())
    bars = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "bar"]
    assert [b.get("data-level") for b in bars] == ["off", "fast", "full"] * 2
    heights = [float(b.get("height", "0")) for b in bars]
    # Each group is scaled to its tallest bar (full): heights keep the times' ratios.
    assert heights[2] == heights[5] == 300.0
    assert abs(heights[0] / heights[2] - 54.874 / 58.443) < 1e-3
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "+1.5 %" in texts and "+0.5 %" in texts  # fast over off, eager and graph
    assert "realistic eager" in texts and "realistic graph" in texts


def test_a_line_of_another_benchmark_is_refused(tmp_path: Path) -> None:
    results = tmp_path / "other.json"
    results.write_text(json.dumps({"benchmark": "audit"}) + "\n")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(results), "-o", str(tmp_path / "x.svg")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "not a bench_sanitizer_overhead.py result" in proc.stderr
