"""The editor-side settings of ``swacheck server``.

They come as ``initializationOptions`` and again, under a ``swacheck`` key, with
``workspace/didChangeConfiguration`` (camelCase, as editors' settings are). What the
audit checks is not among them: that is the project's ``[tool.swacheck]``, exactly as
the command line reads it, so the editor and CI always agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

# Keystrokes closer together than this are one burst, audited once after its last key
# (typing runs at 5-10 keys a second; an audit of an edited SWA file of SGLang takes
# about a tenth of a second of CPU). A key after a longer pause is audited at once while
# audits take less than twice this (see swacheck.server.schedule).
DEFAULT_DEBOUNCE_MS = 150


@dataclass(frozen=True)
class Settings:
    # A pyproject.toml or TOML file to read instead of the nearest one (``--config``).
    configuration: Path | None = None
    # Quiet time after an edit before its audit, when edits come faster than this.
    debounce_ms: int = DEFAULT_DEBOUNCE_MS
    # Whether "fix all" applies unsafe fixes too (``--unsafe-fixes``); quick fixes of
    # single findings always offer them, labelled.
    unsafe_fixes: bool = False


def read_settings(value: Any, base: Settings) -> tuple[Settings, list[str]]:
    """``base`` updated from the client's settings object, and a message per key that
    was unknown or of the wrong type (such keys are left as they were)."""
    if value is None:
        return base, []
    if not isinstance(value, Mapping):
        return base, [f"settings: expected an object, got {type(value).__name__}"]
    problems: list[str] = []
    changes: dict[str, Any] = {}
    for key, item in value.items():
        if key == "configuration":
            if item is None or (isinstance(item, str) and item):
                changes["configuration"] = Path(item).expanduser() if item else None
            else:
                problems.append(f"configuration: expected a path, got {item!r}")
        elif key == "debounceMs":
            if isinstance(item, int) and not isinstance(item, bool) and item >= 0:
                changes["debounce_ms"] = item
            else:
                problems.append(f"debounceMs: expected a whole number >= 0, got {item!r}")
        elif key == "unsafeFixes":
            if isinstance(item, bool):
                changes["unsafe_fixes"] = item
            else:
                problems.append(f"unsafeFixes: expected true or false, got {item!r}")
        else:
            known = "configuration, debounceMs, unsafeFixes"
            problems.append(f"unknown setting {key!r} (known: {known})")
    return replace(base, **changes), problems
