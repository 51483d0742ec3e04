"""Worker processes that parse their share of the files once, for both passes.

The audit needs every file's facts before any file can be checked, and parsing is
most of its cost. A pool that maps each pass separately must parse every file twice;
here each worker owns a fixed shard (balanced by size), keeps its parsed trees after
the first pass and checks them in the second. A worker that dies is replaced by the
parent doing that shard's work itself, so a crash costs time, never findings.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from swacheck.analysis.index import ModuleFacts, ProjectIndex
from swacheck.config import Config
from swacheck.engine.checker import CheckOutcome, check_parsed, collect_facts
from swacheck.engine.gc_pause import gc_paused
from swacheck.engine.limits import OutOfTime, out_of_time, time_limit
from swacheck.engine.parse import Parsed, parse_regions
from swacheck.finding import Finding
from swacheck.rule import Rule
from swacheck.triggers import TriggerSet

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

# One file: its index in the audit, display path and bytes.
Item = tuple[int, str, bytes]
# What the second pass asks of a file: its index and its path relative to the root.
Wanted = tuple[int, str]
# The second pass's request: files, rules, the project index, codes for unused noqa.
Request = tuple[Sequence[Wanted], Sequence[type[Rule]], ProjectIndex, frozenset[str] | None]


def parse_and_collect(
    items: Sequence[Item], rules: Sequence[type[Rule]], config: Config, regions: TriggerSet | None
) -> tuple[dict[int, Parsed], list[tuple[int, ModuleFacts | Finding]]]:
    """Parse and collect facts (the serial path runs this too); keep the parsed trees.

    Each file within the per-file bounds (``max-file-size``, ``max-file-time``)."""
    parsed: dict[int, Parsed] = {}
    results: list[tuple[int, ModuleFacts | Finding]] = []
    for index, display, data in items:
        try:
            with time_limit(config.max_file_time):
                tree = parse_regions(display, data, regions, config.max_file_size)
                first = (
                    collect_facts(display, tree, rules, config)
                    if isinstance(tree, Parsed)
                    else tree
                )
        except OutOfTime:
            results.append((index, out_of_time(display, config.max_file_time)))
            continue
        if isinstance(tree, Parsed) and not isinstance(first, Finding):
            parsed[index] = tree
        results.append((index, first))
    return parsed, results


def _second(
    items: Sequence[Item],
    parsed: dict[int, Parsed],
    request: Request,
    config: Config,
) -> list[tuple[int, CheckOutcome]]:
    wanted, rules, project, known = request
    display = {index: name for index, name, _ in items}
    return [
        (
            index,
            check_parsed(display[index], relative, parsed[index], rules, config, project, known),
        )
        for index, relative in wanted
        if index in parsed
    ]


def _serve(
    conn: Connection,
    items: Sequence[Item],
    rules: Sequence[type[Rule]],
    config: Config,
    regions: TriggerSet | None,
) -> None:
    """A worker: first pass, then (if asked) the second pass on the kept trees."""
    try:
        with gc_paused():  # the worker's trees live until it exits
            parsed, results = parse_and_collect(items, rules, config, regions)
            conn.send(("ok", results))
            request = conn.recv()
            if request is not None:
                conn.send(("ok", _second(items, parsed, request, config)))
    except BaseException as exc:  # reported to the parent, which re-raises it
        conn.send(("error", exc))
    finally:
        conn.close()


class ShardPool:
    """``jobs`` workers, each owning a size-balanced shard of ``items``."""

    def __init__(
        self,
        jobs: int,
        items: Sequence[Item],
        rules: Sequence[type[Rule]],
        config: Config,
        regions: TriggerSet | None,
    ) -> None:
        self.rules, self.config, self.regions = rules, config, regions
        shards: list[list[Item]] = [[] for _ in range(jobs)]
        loads = [0] * jobs
        for item in sorted(items, key=lambda item: -len(item[2])):
            lightest = loads.index(min(loads))
            shards[lightest].append(item)
            loads[lightest] += len(item[2])
        self.shards = [shard for shard in shards if shard]
        import multiprocessing  # only parallel runs need it (7 ms of a pre-commit call)

        context = multiprocessing.get_context()
        self._workers: list[tuple[Any, Connection | None]] = []
        for shard in self.shards:
            parent, child = context.Pipe()
            process = context.Process(
                target=_serve, args=(child, shard, rules, config, regions), daemon=True
            )
            process.start()
            child.close()
            self._workers.append((process, parent))
        # Shards whose worker died: the parent keeps their trees instead.
        self._local: dict[int, dict[int, Parsed]] = {}

    def _receive(self, number: int) -> Any | None:
        """The worker's reply, or ``None`` if it died (its connection is dropped)."""
        process, conn = self._workers[number]
        if conn is None:
            return None
        try:
            status, payload = conn.recv()
        except (EOFError, OSError):
            self._workers[number] = (process, None)
            return None
        if status == "error":
            raise payload
        return payload

    def first_pass(self) -> dict[int, ModuleFacts | Finding]:
        results: dict[int, ModuleFacts | Finding] = {}
        for number, shard in enumerate(self.shards):
            reply = self._receive(number)
            if reply is None:
                self._local[number], reply = parse_and_collect(
                    shard, self.rules, self.config, self.regions
                )
            results.update(reply)
        return results

    def second_pass(self, request: Request) -> dict[int, CheckOutcome]:
        for _, conn in self._workers:
            if conn is not None:
                with contextlib.suppress(OSError):  # a dead worker: handled on receive
                    conn.send(request)
        outcomes: dict[int, CheckOutcome] = {}
        for number, shard in enumerate(self.shards):
            reply = None if number in self._local else self._receive(number)
            if reply is None:
                parsed = self._local.get(number)
                if parsed is None:
                    parsed, _ = parse_and_collect(shard, self.rules, self.config, self.regions)
                reply = _second(shard, parsed, request, self.config)
            outcomes.update(reply)
        return outcomes

    def close(self) -> None:
        for process, conn in self._workers:
            if conn is not None:
                with contextlib.suppress(OSError):  # it has already finished
                    conn.send(None)
                conn.close()
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
