"""Reports: counts per kind, checks run, JSON and text; ``log`` counts without raising."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from swacheck.runtime import KINDS, STALE_TRANSLATION, Sanitizer


def stale_twice(toy: SimpleNamespace, san: Sanitizer) -> None:
    for _ in range(2):
        pool = toy.Pool()
        locs = pool.alloc(4)
        san.watch(pool)
        pool.translate_loc_from_full_to_swa(locs)
        locs.add_(1)
        pool.translate_loc_from_full_to_swa(locs)


def test_log_action_counts_and_logs(toy: SimpleNamespace, caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="swacheck.runtime"),
        Sanitizer(level="fast", action="log") as san,
    ):
        stale_twice(toy, san)
        report = san.report()
    assert report.counts[STALE_TRANSLATION] == 2
    assert sum(STALE_TRANSLATION in r.getMessage() for r in caplog.records) == 2


def test_report_json_and_text(toy: SimpleNamespace) -> None:
    with Sanitizer(level="full", action="log") as san:
        stale_twice(toy, san)
        report = san.report()
    data = json.loads(report.to_json())
    assert data["level"] == "full"
    assert data["violations"] == 2
    assert set(data["counts"]) == set(KINDS)
    assert data["counts"][STALE_TRANSLATION] == 2
    assert data["checks"][STALE_TRANSLATION] >= 4
    assert data["checks_run"] == report.total_checks
    assert data["watched"] == {"pool": 2}
    assert data["details"][0]["kind"] == STALE_TRANSLATION
    assert data["details"][0]["invariant"] == "I2"
    text = report.to_text()
    assert text.splitlines()[0].startswith("swa-sanitizer (full):")
    assert "stale-translation: 2" in text.splitlines()[0]


def test_bad_level_or_action() -> None:
    with pytest.raises(ValueError, match="level"):
        Sanitizer(level="slow")
    with pytest.raises(ValueError, match="action"):
        Sanitizer(action="ignore")
