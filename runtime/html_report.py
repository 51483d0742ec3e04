"""The sanitizer's failure report as a self-contained HTML page, each violation with a
picture of the batch it is about (``--swa-sanitize-report=html``).

A violation's :class:`~.violations.Picture` is drawn as inline SVG, so the page needs
nothing but a browser (no script, no stylesheet or font from elsewhere, no dependency to
install): the rows of the write or buffer (full location, the SWA location expected,
the one found) with the live rows and the padded rows told apart and every wrong cell
marked, or for the consequence check the SWA slots the forward was allowed to write
beside those it wrote. Violations without a picture (``fast`` finds a padded tail
through device flags, which keep no values; the order checks are about calls, not
rows) are listed with their text. Everything from the engine is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from .violations import INVARIANT_TEXT, UNKNOWN, Picture, Violation

CELL_W, CELL_H, LABEL_W, HEAD_H = 58, 22, 86, 18
# Rows per band of a rows picture, slots per band of a slots picture.
PER_LINE = 16
COLOURS = {
    "live": "#e8f5e9",
    "padded": "#eceff1",
    "wrong": "#ef9a9a",
    "allowed": "#c8e6c9",
    "sentinel": "#bbdefb",
    "written": "#ef9a9a",
    "line": "#37474f",
}
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #212121; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-bottom: 0.2em; }
.summary { font-family: ui-monospace, monospace; white-space: pre-wrap; }
.violation { border-top: 1px solid #cfd8dc; padding-top: 0.8em; margin-top: 1.2em; }
.kind { color: #b71c1c; font-family: ui-monospace, monospace; }
.where, .invariant { color: #546e7a; font-size: 0.9em; }
.none { color: #78909c; font-style: italic; }
svg text { font-family: ui-monospace, monospace; font-size: 11px; }
.legend span { display: inline-block; padding: 0 0.5em; margin-right: 0.5em; }
"""


def render(title: str, summary: Sequence[str], entries: Iterable[tuple[str, Violation]]) -> str:
    """The page: ``summary`` lines, then each ``(test, violation)``."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="summary">{_e(chr(10).join(summary))}</p>',
        _legend(),
    ]
    count = 0
    for test, violation in entries:
        count += 1
        parts.append(_section(test, violation))
    if not count:
        parts.append('<p class="none">No violations.</p>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _section(test: str, violation: Violation) -> str:
    rank = "" if violation.rank is None else f" on rank {violation.rank}"
    lines = [
        '<section class="violation">',
        f'<h2><span class="kind">{_e(violation.kind)}</span>{_e(rank)} in {_e(test)}</h2>',
        f"<p>{_e(violation.message)}</p>",
        f'<p class="where">at {_e(violation.site)}</p>',
        f'<p class="invariant">{_e(violation.invariant)}: '
        f"{_e(INVARIANT_TEXT[violation.invariant])}</p>",
    ]
    if violation.picture is not None:
        lines.append(picture_svg(violation.picture))
    elif violation.values:
        lines.append(f"<p>values: {_e(', '.join(map(str, violation.values)))}</p>")
    lines.append("</section>")
    return "\n".join(lines)


def _legend() -> str:
    keys = (
        ("live", "live row"),
        ("padded", "padded row"),
        ("wrong", "wrong: found differs from expected"),
        ("allowed", "slot of the batch"),
        ("sentinel", "sentinel slot"),
    )
    spans = "".join(f'<span style="background:{COLOURS[k]}">{_e(text)}</span>' for k, text in keys)
    return f'<p class="legend">{spans}</p>'


def picture_svg(picture: Picture) -> str:
    """The picture as one ``<svg>`` element."""
    if picture.actual:
        return _rows_svg(picture)
    return _slots_svg(picture)


def _rows_svg(picture: Picture) -> str:
    """Bands of ``PER_LINE`` rows; per row a column: its index, then the full location,
    the SWA location expected and the one found."""
    n = len(picture.actual)
    bands = (n + PER_LINE - 1) // PER_LINE
    band_h = HEAD_H + 3 * CELL_H + 12
    width = LABEL_W + min(n, PER_LINE) * CELL_W + 2
    height = bands * band_h + 4
    out = [_svg_open(width, height, f"rows of {picture.label}")]
    raw = picture.raw
    for i in range(n):
        band, column = divmod(i, PER_LINE)
        x = LABEL_W + column * CELL_W
        y = band * band_h
        row = picture.first_row + i
        padded = raw is not None and row >= raw
        if column == 0:
            for k, name in enumerate(("full", "expected", "found")):
                out.append(_text(4, y + HEAD_H + k * CELL_H + 15, name))
        out.append(_text(x + 4, y + 13, f"row {row}", "padded" if padded else "live"))
        background = COLOURS["padded" if padded else "live"]
        expected = _at(picture.expected, i)
        actual = picture.actual[i]
        wrong = expected != UNKNOWN and expected != actual
        cells = (_at(picture.full, i), expected, actual)
        for k, value in enumerate(cells):
            fill = COLOURS["wrong"] if wrong and k == 2 else background
            cell_y = y + HEAD_H + k * CELL_H
            kind = ("full", "expected", "found wrong" if wrong else "found")[k]
            out.append(_cell(x, cell_y, fill, kind))
            out.append(_text(x + 4, cell_y + 15, "·" if value == UNKNOWN else str(value)))
        if raw is not None and row == raw and i:
            out.append(_boundary(x, y, 3 * CELL_H + HEAD_H))
    out.append("</svg>")
    return "\n".join(out)


def _slots_svg(picture: Picture) -> str:
    """The SWA slots the forward could write and those it wrote outside them."""
    allowed = set(picture.allowed)
    written = set(picture.written)
    slots = sorted(allowed | written)
    n = len(slots)
    bands = max((n + PER_LINE - 1) // PER_LINE, 1)
    width = LABEL_W + max(min(n, PER_LINE), 1) * CELL_W + 2
    height = bands * (CELL_H + 8) + 4
    out = [_svg_open(width, height, f"SWA slots of {picture.label}")]
    for i, slot in enumerate(slots):
        band, column = divmod(i, PER_LINE)
        x, y = LABEL_W + column * CELL_W, band * (CELL_H + 8)
        if column == 0:
            out.append(_text(4, y + 15, "SWA slot"))
        if slot in written:
            kind = "written"
        elif slot == 0:
            kind = "sentinel"
        else:
            kind = "allowed"
        out.append(_cell(x, y, COLOURS[kind], kind))
        out.append(_text(x + 4, y + 15, str(slot)))
    out.append("</svg>")
    return "\n".join(out)


def _svg_open(width: int, height: int, title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img"><title>{_e(title)}</title>'
    )


def _cell(x: int, y: int, fill: str, kind: str) -> str:
    return (
        f'<rect class="{_e(kind)}" x="{x}" y="{y}" width="{CELL_W - 2}" height="{CELL_H - 2}" '
        f'fill="{fill}" stroke="#b0bec5"/>'
    )


def _boundary(x: int, y: int, height: int) -> str:
    return (
        f'<line class="live-padded" x1="{x - 1}" y1="{y}" x2="{x - 1}" y2="{y + height}" '
        f'stroke="{COLOURS["line"]}" stroke-width="2" stroke-dasharray="4 2"/>'
    )


def _text(x: int, y: int, text: str, kind: str = "") -> str:
    attribute = f' class="{_e(kind)}"' if kind else ""
    return f'<text{attribute} x="{x}" y="{y}">{_e(text)}</text>'


def _at(values: Sequence[int], i: int) -> int:
    return values[i] if i < len(values) else UNKNOWN


def _e(text: str) -> str:
    return html.escape(text, quote=True)
