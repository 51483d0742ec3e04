"""Checks on a CUDA-graph runner: capture/warm-up runs start with an empty cache (I5),
static SWA-location buffers have the SWA dtype (I3), padded tails hold the sentinel
after populate (I4), and replay is a forward (I6, consequence check).

A runner is recognised by its ``populate_from_forward_batch``/``replay``/``capture``
methods. Each ``run_once`` call inside ``capture`` is one capture run; a runner without
``run_once`` counts its whole ``capture`` call as one.

Populate and replay run on every graph decode step. What populate checks is worked out
once per padded shape and kept as a :class:`PaddingPlan` (per location buffer: its
padded tail as a view, and how the tails reach the device flags), valid while the
buffers stay bound at the same address and size; a populate then costs a few
comparisons and one device op, a ``torch.cat`` of every buffer's tail into a slot of the
flags' staging ring.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch

from . import violations as V
from .checks import Checks
from .deferred import DeviceFlags, Layout, is_capturing, segment_size, staged_form
from .locations import AttributeScan, argument, batch_argument, parameters, unchanged

POPULATE = "populate_from_forward_batch"
RUN_METHOD = "run_once"
# Padded slots must point at the sentinel slot (I4).
SENTINEL_SLOT = 0
# Where populate says how many tokens are real and how many the bucket holds, first match
# wins: its arguments, then attributes it left on the runner.
RAW_COUNT_NAMES = ("raw_num_token", "raw_num_tokens", "raw_bs")
PADDED_COUNT_NAMES = ("num_tokens", "num_token", "padded_bs", "bs")
# A location buffer is one whose name holds this (DESIGN.md, SWA003).
LOCATION_WORD = "loc"
# Padded-tail views kept for reuse in padding plans (a few per bucket); the plans start
# over when they hold this many.
MAX_TAIL_VIEWS = 256


def install_graph_runner(checks: Checks, runner: object) -> GraphRunnerWatch:
    watch = GraphRunnerWatch(checks, runner)
    patch = checks.patcher.wrap_method
    if callable(getattr(runner, "capture", None)):
        patch(runner, "capture", watch.wrap_capture)
    run_target = _run_target(runner)
    if run_target is not None:
        patch(*run_target, watch.wrap_run)
    for owner in _populate_owners(runner):
        patch(owner, POPULATE, watch.wrap_populate(owner))
    if callable(getattr(runner, "replay", None)):
        patch(runner, "replay", watch.wrap_replay)
    return watch


def _run_target(runner: object) -> tuple[object, str] | None:
    """What one capture/warm-up run calls: the runner's ``run_once`` method, else (SGLang,
    where ``run_once`` is a closure) the forward of ``runner.model_runner.model``."""
    if callable(getattr(runner, RUN_METHOD, None)):
        return runner, RUN_METHOD
    model = getattr(getattr(runner, "model_runner", None), "model", None)
    if model is not None and callable(getattr(model, "forward", None)):
        return model, "forward"
    return None


def _populate_owners(runner: object) -> list[object]:
    """The runner, or the input-buffer object it holds, whichever has the populate method."""
    owners = [runner] if callable(getattr(runner, POPULATE, None)) else []
    for value in list(vars(runner).values()):
        if not isinstance(value, (type, torch.Tensor)) and callable(getattr(value, POPULATE, None)):
            owners.append(value)
    return owners


class PaddingPlan:
    """What one populate of a given padded shape checks (I4), worked out once: per
    location buffer, the buffer with its address and size when planned and its padded
    tail (a view, or ``None`` for a non-contiguous buffer, whose flattening is a copy).
    In ``fast``, ``staged`` says, per device, which tails go into one ring slot with one
    ``torch.cat`` (their int32 forms, where each lies in the slot, and each tail's
    segment should the ring be unable to take them), and ``loose`` the tails ORed into
    the accumulator one by one instead (see ``deferred.py``)."""

    __slots__ = ("buffers", "found", "loose", "staged", "tails")

    def __init__(
        self,
        found: list[tuple[str, str, torch.Tensor]],
        buffers: list[tuple[torch.Tensor, int, int]],
        tails: list[tuple[str, torch.Tensor, torch.Tensor | None]],
        staged: list[Staged],
        loose: list[tuple[torch.Tensor, torch.Tensor | None, DeviceFlags, int]],
    ) -> None:
        self.found = found
        self.buffers = buffers
        self.tails = tails
        self.staged = staged
        self.loose = loose

    def holds(self) -> bool:
        """Whether each buffer is still at the same address with the same size (the caller
        checks that the scan that found them, ``found``, is still the last one)."""
        for buffer, pointer, numel in self.buffers:
            if buffer.data_ptr() != pointer or buffer.numel() != numel:
                return False
        return True


# One device's staged tails in a padding plan: its flags, the tails' int32 forms in slot
# order, where each lies in the slot, the slot length, and (segment, tail) per tail.
Staged = tuple[
    DeviceFlags,
    tuple[torch.Tensor, ...],
    Layout,
    int,
    tuple[tuple[int, torch.Tensor], ...],
]


class GraphRunnerWatch:
    def __init__(self, checks: Checks, runner: object) -> None:
        self.checks = checks
        self.runner = runner
        self.label = type(runner).__qualname__
        self.runs_known = _run_target(runner) is not None
        self._batch_locs_registered = False
        names = checks.names
        self._swa_buffers = AttributeScan(runner, lambda name, _: names.is_swa(name))
        # Per populate owner: its location buffers; per buffer, its accumulator segment.
        self._location_buffers: dict[int, AttributeScan] = {}
        self._slots: dict[tuple[int, str], tuple[DeviceFlags, int]] = {}
        # Per populate owner: the namespaces its populate checks for rebinding (_buffers).
        self._watched: dict[int, list[tuple[dict[str, Any], tuple[Any, ...]]]] = {}
        # Padding plans per populate owner by (raw, padded), and how many tails they hold.
        self._plans: dict[int, dict[tuple[int, int], PaddingPlan]] = {}
        self._planned_tails = 0

    def wrap_capture(self, original: Callable[..., Any]) -> Callable[..., Any]:
        checks = self.checks

        def capture(*args: Any, **kwargs: Any) -> Any:
            checks.enter_capture()
            if not self.runs_known:
                checks.begin_capture_run()
            try:
                result = original(*args, **kwargs)
            except BaseException:
                if not self.runs_known:
                    checks.end_scope(ok=False)
                checks.leave_capture()
                raise
            if not self.runs_known:
                checks.end_scope()
            checks.leave_capture()
            self._check_buffer_dtypes("after capture")
            return result

        return capture

    def wrap_run(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """One capture/warm-up run when inside ``capture``; otherwise (an eager "replay" on
        CPU, an eager forward) part of whatever forward is in progress. The run's first
        cache access checks that it began with an empty cache (I5): the invalidation may
        sit at the top of the run itself, as in SGLang's ``run_once``."""
        checks = self.checks

        def run(*args: Any, **kwargs: Any) -> Any:
            if not checks.capture_depth:
                return original(*args, **kwargs)
            checks.begin_capture_run()
            try:
                result = original(*args, **kwargs)
            except BaseException:
                checks.end_scope(ok=False)
                raise
            checks.end_scope()
            return result

        return run

    def wrap_populate(self, owner: object) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        self._location_buffers[id(owner)] = AttributeScan(owner, _is_location_buffer)

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            """After a populate: the static SWA buffers' dtype (I3), then the padded tails
            (I4) unless the stream is capturing. It runs on every graph decode step, so
            its common path is this one function: the buffers found by the last scans
            (their namespaces compared by identity), the counts read where populate takes
            them positionally, the padding plan for the shape, and in ``fast`` the tails
            concatenated into the next ring slot of the device flags."""
            params = parameters(original)
            runner = self.runner
            raw_params = _named(params, RAW_COUNT_NAMES)
            padded_params = _named(params, PADDED_COUNT_NAMES)
            raw_count = _counter(raw_params, RAW_COUNT_NAMES, owner, runner)
            padded_count = _counter(padded_params, PADDED_COUNT_NAMES, owner, runner)
            raw_at = _position(raw_params)
            padded_at = _position(padded_params)
            checks = self.checks
            swa_scan = self._swa_buffers
            location_scan = self._location_buffers[id(owner)]
            plans: dict[tuple[int, int], PaddingPlan] = {}
            self._plans[id(owner)] = plans
            cat = torch.cat
            fast = not checks.full
            self._rescan(owner)

            def populate(*args: Any, **kwargs: Any) -> Any:
                result = original(*args, **kwargs)
                if not self._batch_locs_registered:
                    self._register_batch_locs()
                if not unchanged(self._watched[id(owner)]):
                    self._rescan(owner)
                self._check_dtypes(swa_scan.found, "after populate_from_forward_batch")
                # Nothing goes to the device while the stream is capturing. Asking CUDA
                # costs microseconds, so only within the runner's ``capture``: a runner
                # captures its graphs there (that is how it was recognised).
                if checks.capture_depth and is_capturing():
                    return result
                raw = args[raw_at] if len(args) > raw_at else None
                if type(raw) is not int:
                    raw = self._raw(raw_count, args, kwargs)
                padded = args[padded_at] if len(args) > padded_at else None
                if type(padded) is not int:
                    padded = padded_count(args, kwargs)
                if raw is None or padded is None or padded <= raw:
                    return result
                found = location_scan.found
                plan = plans.get((raw, padded))
                if plan is None or plan.found is not found or not plan.holds():
                    plan = plans[(raw, padded)] = self._plan(owner, found, raw, padded)
                checks.padding_checks += len(plan.tails)
                if not fast:
                    self._compare_tails(owner, plan, raw, padded)
                    return result
                # Slot 0 is the sentinel, so a tail entry off it is simply a non-zero one:
                # the tails go to the device flags as they are, read at a later safe point.
                for flags, sources, layout, n, parts in plan.staged:
                    out = flags.stage(layout, n)
                    if out is not None:
                        cat(sources, out=out)
                    else:
                        for segment, tail in parts:
                            flags.accumulate(segment, raw, padded, tail)
                for buffer, tail, flags, segment in plan.loose:
                    if tail is None:
                        tail = buffer.reshape(-1)[raw:padded]
                    flags.accumulate(segment, raw, padded, tail)
                return result

            return populate

        return make

    def wrap_replay(self, original: Callable[..., Any]) -> Callable[..., Any]:
        checks = self.checks

        def replay(*args: Any, **kwargs: Any) -> Any:
            if not self._batch_locs_registered:
                self._register_batch_locs()
            checks.forward_called(args, kwargs)
            try:
                checks.dispatch()
                result = original(*args, **kwargs)
            except BaseException:
                checks.end_scope(ok=False)
                raise
            checks.end_scope()
            return result

        return replay

    # -- checks -------------------------------------------------------------------------

    def _register_batch_locs(self) -> None:
        """The runner's static location buffers are the batch's locations during replay."""
        locs = self.checks.names.batch_locs(self.runner)
        if locs:
            self.checks.add_static_batch_locs(locs)
            self._batch_locs_registered = True

    def _check_buffer_dtypes(self, when: str) -> None:
        self._check_dtypes(self._swa_buffers.tensors(), when)

    def _check_dtypes(self, found: list[tuple[str, str, torch.Tensor]], when: str) -> None:
        checks = self.checks
        for label, _, t in found:
            checks.dtype_checks += 1
            if t.dtype is not checks.swa_dtype:
                checks.flag_dtype(t, f"{self.label}.{label} ({when})")

    def _rescan(self, owner: object) -> None:
        """Rescan the runner's SWA buffers and ``owner``'s location buffers, and note the
        namespaces the two scans looked at (the input buffers are usually one of the
        runner's), each once: what populate compares for a rebinding."""
        swa, locations = self._swa_buffers, self._location_buffers[id(owner)]
        swa.rescan()
        locations.rescan()
        seen: dict[int, tuple[dict[str, Any], tuple[Any, ...]]] = {}
        for snapshot in (*swa.snapshots, *locations.snapshots):
            seen.setdefault(id(snapshot[0]), snapshot)
        self._watched[id(owner)] = list(seen.values())

    def _raw(self, count: Counter, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
        """The real token count of a populate call not passing it positionally."""
        raw = count(args, kwargs)
        if raw is None:
            batch = batch_argument(args, kwargs)
            locs = self.checks.names.batch_locs(batch) if batch is not None else []
            raw = locs[0].numel() if locs else None
        return raw

    def _compare_tails(self, owner: object, plan: PaddingPlan, raw: int, padded: int) -> None:
        """``full``: every location buffer's padded tail points at the sentinel, read now."""
        for label, buffer, tail in plan.tails:
            if tail is None:
                tail = buffer.reshape(-1)[raw:padded]
            where = tail.ne(SENTINEL_SLOT).nonzero().reshape(-1)[: V.MAX_VALUES]
            if where.numel():
                self.checks.record(
                    V.PADDING_NOT_ZEROED,
                    f"{type(owner).__qualname__}.{label}: padded tail [{raw}:{padded}] holds "
                    f"non-sentinel slots at positions {[raw + i for i in where.tolist()]}; "
                    f"padded tokens write their KV there",
                    values=tail[where].tolist(),
                )

    def _plan(
        self, owner: object, found: list[tuple[str, str, torch.Tensor]], raw: int, padded: int
    ) -> PaddingPlan:
        """Work out what a populate of ``owner`` padded from ``raw`` to ``padded`` checks."""
        if self._planned_tails >= MAX_TAIL_VIEWS:
            for plans in self._plans.values():
                plans.clear()
            self._planned_tails = 0
        buffers = []
        tails: list[tuple[str, torch.Tensor, torch.Tensor | None]] = []
        groups: dict[DeviceFlags, list[tuple[int, torch.Tensor, torch.Tensor]]] = {}
        loose: list[tuple[torch.Tensor, torch.Tensor | None, DeviceFlags, int]] = []
        for label, _, buffer in found:
            buffers.append((buffer, buffer.data_ptr(), buffer.numel()))
            if buffer.numel() < padded:
                continue
            if buffer.dim() == 1:
                tail: torch.Tensor | None = buffer[raw:padded]
            elif buffer.is_contiguous():
                tail = buffer.view(-1)[raw:padded]
            else:
                tail = None
            tails.append((label, buffer, tail))
            if self.checks.full:
                continue
            flags, segment = self._slot(owner, label, buffer)
            form = None if tail is None else staged_form(tail)
            if form is None:
                loose.append((buffer, tail, flags, segment))
            else:
                groups.setdefault(flags, []).append((segment, tail, form))
        staged: list[Staged] = []
        for flags, members in groups.items():
            layout, first = [], 0
            for segment, _, form in members:
                layout.append((segment, first, first + form.numel()))
                first += form.numel()
            sources = tuple(form for _, _, form in members)
            parts = tuple((segment, tail) for segment, tail, _ in members)
            staged.append((flags, sources, tuple(layout), first, parts))
        self._planned_tails += len(tails)
        return PaddingPlan(found, buffers, tails, staged, loose)

    def bookkeeping(self) -> dict[str, int]:
        """Sizes of what this watch keeps (see ``Sanitizer.bookkeeping``)."""
        scans = [self._swa_buffers, *self._location_buffers.values()]
        return {
            "scan_snapshot_values": sum(scan.snapshot_size() for scan in scans),
            "flag_slot_handles": len(self._slots),
            "tail_views": self._planned_tails,
        }

    def _slot(self, owner: object, label: str, buffer: torch.Tensor) -> tuple[DeviceFlags, int]:
        key = (id(owner), label)
        slot = self._slots.get(key)
        if slot is None or slot[0].device != buffer.device or segment_size(slot) < buffer.numel():
            slot = self._slots[key] = self.checks.flags.slot(
                f"{type(owner).__qualname__}.{label}", buffer, V.call_site
            )
        return slot


def _is_location_buffer(name: str, value: torch.Tensor) -> bool:
    return LOCATION_WORD in name and value.dim() >= 1


def _named(
    params: list[tuple[int | None, str]], names: tuple[str, ...]
) -> list[tuple[int | None, str]]:
    """The parameters among ``params`` called one of ``names``, in the order of ``names``."""
    by_name = dict((name, index) for index, name in params)
    return [(by_name[name], name) for name in names if name in by_name]


def _position(params: list[tuple[int | None, str]]) -> int:
    """Where the first of ``params`` is passed positionally (read directly), or a position
    no call reaches if it cannot be."""
    return params[0][0] if params and params[0][0] is not None else sys.maxsize


Counter = Callable[[tuple[Any, ...], dict[str, Any]], int | None]


def _counter(
    params: list[tuple[int | None, str]],
    names: tuple[str, ...],
    owner: object,
    runner: object,
) -> Counter:
    """Reads a count from a populate call: the first of ``names`` that holds an int among
    its arguments (``params``), then attributes it left on the owner, then on the runner."""

    def count(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
        for index, name in params:
            value = argument(args, kwargs, index, name)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        for source in (vars(owner), vars(runner)):
            for name in names:
                value = source.get(name)
                if isinstance(value, int) and not isinstance(value, bool):
                    return value
        return None

    return count
