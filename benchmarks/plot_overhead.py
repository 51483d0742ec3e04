"""The runtime sanitizer's overhead per decode step as an SVG bar chart, for BENCHMARKS.md.

Reads the JSON result lines ``bench_sanitizer_overhead.py`` prints (its last stdout line;
several runs may be given: one group of bars per workload and decode path) and writes one
SVG: per group, the median milliseconds per decode step unsanitized (``off``) and at each
level, each bar labelled with its time and its overhead over ``off``.

    python benchmarks/bench_sanitizer_overhead.py --workload realistic | tail -1 > realistic.json
    python benchmarks/plot_overhead.py realistic.json tiny.json -o benchmarks/sanitizer_overhead.svg

Then, in BENCHMARKS.md: ``![Sanitizer overhead per decode step](sanitizer_overhead.svg)``.
The SVG is written directly (no matplotlib: it is not a dependency of swacheck, and a
bar chart is a few dozen elements); ``-`` reads the lines from stdin.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

LEVEL_COLOURS = {"off": "#9e9e9e", "fast": "#1f77b4", "full": "#d62728"}
OTHER_COLOUR = "#2ca02c"
BAR, GAP, GROUP_GAP = 34, 6, 42
TOP, BOTTOM, LEFT, RIGHT = 56, 86, 64, 24
HEIGHT = 300  # of the plotting area


@dataclass(frozen=True)
class Group:
    """One workload and decode path: ms per step by level, in the benchmark's order."""

    label: str
    ms: dict[str, float]


def groups(results: Iterable[dict]) -> list[Group]:
    """The groups of bench_sanitizer_overhead.py's results."""
    found = []
    for result in results:
        if result.get("benchmark") != "sanitizer_overhead_per_decode_step":
            raise ValueError("not a bench_sanitizer_overhead.py result line")
        for mode, levels in result["ms_per_step"].items():
            label = f"{result.get('workload', '')} {mode}".strip()
            found.append(Group(label, {lv: float(f["median_ms"]) for lv, f in levels.items()}))
    return found


def _overhead(ms: float, off: float) -> str:
    ratio = ms / off
    return f"+{(ratio - 1) * 100:.1f} %" if ratio < 1.1 else f"{ratio:.2f}×"


def render(found: Sequence[Group], title: str) -> str:
    """The SVG document. Each group is scaled to its own tallest bar: steps of different
    workloads differ by an order of magnitude, and the overhead is what is compared."""
    if not found:
        raise ValueError("no results to plot")
    widths = [len(g.ms) * (BAR + GAP) - GAP for g in found]
    width = LEFT + sum(widths) + GROUP_GAP * (len(found) - 1) + RIGHT
    height = TOP + HEIGHT + BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="14" '
        f'font-weight="bold">{escape(title)}</text>',
        f'<text x="{width / 2}" y="40" text-anchor="middle" fill="#555">median ms per decode '
        "step; label: time, overhead over off (each group scaled to itself)</text>",
        f'<line x1="{LEFT - 8}" y1="{TOP + HEIGHT}" x2="{width - RIGHT}" y2="{TOP + HEIGHT}" '
        'stroke="#333"/>',
    ]
    x = LEFT
    for group, group_width in zip(found, widths, strict=True):
        tallest = max(group.ms.values())
        off = group.ms.get("off")
        for level, ms in group.ms.items():
            bar = HEIGHT * ms / tallest if tallest > 0 else 0
            y = TOP + HEIGHT - bar
            colour = LEVEL_COLOURS.get(level, OTHER_COLOUR)
            parts.append(
                f'<rect class="bar" data-level="{escape(level)}" x="{x}" y="{y:.1f}" '
                f'width="{BAR}" height="{bar:.1f}" fill="{colour}"><title>{escape(group.label)}'
                f" {escape(level)}: {ms:.3f} ms</title></rect>"
            )
            label = f"{ms:.2f}" if off is None or level == "off" else _overhead(ms, off)
            parts.append(
                f'<text x="{x + BAR / 2}" y="{y - 4:.1f}" text-anchor="middle">'
                f"{escape(label)}</text>"
            )
            parts.append(
                f'<text x="{x + BAR / 2}" y="{TOP + HEIGHT + 14}" text-anchor="middle" '
                f'fill="#333">{escape(level)}</text>'
            )
            x += BAR + GAP
        centre = x - GAP - group_width / 2
        off_text = f" (off {off:.2f} ms)" if off is not None else ""
        parts.append(
            f'<text x="{centre}" y="{TOP + HEIGHT + 34}" text-anchor="middle" '
            f'font-weight="bold">{escape(group.label)}</text>'
        )
        parts.append(
            f'<text x="{centre}" y="{TOP + HEIGHT + 50}" text-anchor="middle" fill="#555">'
            f"{escape(off_text.strip())}</text>"
        )
        x += GROUP_GAP - GAP
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _read(sources: Sequence[str]) -> list[dict]:
    lines = []
    for source in sources:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        lines += [line for line in text.splitlines() if line.strip().startswith("{")]
    return [json.loads(line) for line in lines]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="files of JSON result lines, or - for stdin")
    parser.add_argument("-o", "--output", type=Path, default=Path("sanitizer_overhead.svg"))
    parser.add_argument("--title", default="swacheck runtime sanitizer: overhead per decode step")
    args = parser.parse_args(argv)
    try:
        svg = render(groups(_read(args.results)), args.title)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"plot_overhead: {exc}", file=sys.stderr)
        return 2
    args.output.write_text(svg, encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
