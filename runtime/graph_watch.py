"""Checks on a CUDA-graph runner and its input buffers: capture/warm-up runs start with
an empty cache (I5), static SWA-location buffers have the SWA dtype (I3), padded tails
hold the sentinel after populate (I4), and replay is a forward (I6, consequence check).

A runner is recognised by a replay method (``replay-methods``: SGLang's ``replay`` up to
0.5.13, ``execute`` from 0.5.14) with a capture (``capture-methods``) or populate method
(``populate-methods``: ``populate_from_forward_batch``, the 0.5.14+ buffer registry's
``fill_from``). Its input buffers are the objects it holds that have a populate method
(or the runner itself); they are found when the runner is watched, whenever it captures
and at its first replay, so a runner watched before its ``__init__`` ran (which
captures, in SGLang) is complete by then. Input buffers some other watch already wraps
(watched on their own) are left to it. Each
``capture-run-methods`` call (``run_once``) inside ``capture`` is one capture run; where
the run is a closure (SGLang), each forward of ``runner.model_runner.model`` is; a
runner with neither counts its whole ``capture`` call as one.

Padded and raw sizes are token counts: ``raw_num_tokens``/``padded_num_tokens`` where
populate is given them, else requests times tokens per request (``num_tokens_per_bs``,
speculative decoding's draft tokens), so a padded speculative batch's tail is checked
token by token.

Populate and replay run on every graph decode step. What populate checks is worked out
once per padded shape and kept as a :class:`PaddingPlan` (per location buffer: its
padded tail as a view, and how the tails reach the device flags), valid while the
buffers stay bound at the same address and size; a populate then costs a few
comparisons and one device op, a ``torch.cat`` of every buffer's tail into a slot of the
flags' staging ring.

In ``fast`` that device op is sampled (``sampling.py``): a tail populate does not reset
stays stale on every later padded step, so the tails of the first padded populate of
each shape are staged, then those of one padded populate in ``PADDING_SAMPLE_EVERY`` on
average, never more than ``2 * PADDING_SAMPLE_EVERY - 1`` apart. The flags are read at
every ``deferred.POLL_EVERY``-th end of a forward (a copy started at one read lands by
the next) and at the end of a test. So a padding bug is reported within 15 padded replays
of its first stale tail plus 64 forwards, and by the end of the test that saw it at the
latest. ``full`` compares every padded populate's tails on the host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from . import violations as V
from .bytecode import definition
from .checks import Checks
from .deferred import DeviceFlags, Layout, is_capturing, segment_size, staged_form
from .dtype_roles import WRITE, role_of_name
from .locations import AttributeScan, batch_argument, parameters, unchanged
from .roles import first_present
from .sampling import Sampler

# Left out of a violation's pytest traceback (``violations.hide_from_traceback``).
__tracebackhide__ = V.hide_from_traceback

# Padded slots must point at the sentinel slot (I4).
SENTINEL_SLOT = 0
# Where populate says how many tokens (or requests) are real and how many the bucket
# holds, first match wins: its arguments, then attributes of its object, then of the
# runner. Requests count ``TOKENS_PER_REQUEST`` tokens each (1 when nothing says).
RAW_TOKEN_NAMES = ("raw_num_tokens", "raw_num_token")
PADDED_TOKEN_NAMES = ("padded_num_tokens", "num_tokens", "num_token")
RAW_REQUEST_NAMES = ("raw_bs",)
PADDED_REQUEST_NAMES = ("padded_bs", "bs")
TOKENS_PER_REQUEST = ("num_tokens_per_bs",)
# A location buffer is one whose name holds this (DESIGN.md, SWA003).
LOCATION_WORD = "loc"
# Padded-tail views kept for reuse in padding plans (a few per bucket); the plans start
# over when they hold this many.
MAX_TAIL_VIEWS = 256
# ``fast``: padded populates per staging of their tails, on average (module docstring).
PADDING_SAMPLE_EVERY = 8


def install_graph_runner(checks: Checks, runner: object) -> GraphRunnerWatch:
    """Watch a graph runner (found or not yet: see the module docstring)."""
    config = checks.config
    watch = GraphRunnerWatch(checks, runner)
    patch = checks.patcher.wrap_method
    for name in config.capture_methods:
        if callable(getattr(runner, name, None)):
            patch(runner, name, watch.wrap_capture)
    for name in config.replay_methods:
        if callable(getattr(runner, name, None)):
            patch(runner, name, watch.wrap_replay)
    watch.discover()
    return watch


def install_input_buffers(checks: Checks, holder: object) -> GraphRunnerWatch:
    """Watch a runner's input buffers on their own (no runner watched)."""
    watch = GraphRunnerWatch(checks, holder)
    watch.discover()
    return watch


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
        self.run_wrapped = False
        self._replayed = False
        self._batch_locs_registered = False
        names = checks.names
        self._is_swa = lambda name, _: names.is_swa(name)
        # Per object scanned (the runner, each populate owner): its SWA buffers (I3).
        self._swa_buffers: dict[int, AttributeScan] = {
            id(runner): AttributeScan(runner, self._is_swa)
        }
        # Per populate owner: the owner, its location buffers, where its populate is
        # defined; per buffer, its accumulator segment.
        self._owners: dict[int, object] = {}
        self._location_buffers: dict[int, AttributeScan] = {}
        self._populate_sites: dict[int, str] = {}
        self._slots: dict[tuple[int, str], tuple[DeviceFlags, int]] = {}
        # Per populate owner: the namespaces its populate checks for rebinding (_buffers).
        self._watched: dict[int, list[tuple[dict[str, Any], tuple[Any, ...]]]] = {}
        # Padding plans per populate owner by (raw, padded), and how many tails they hold.
        self._plans: dict[int, dict[tuple[int, int], PaddingPlan]] = {}
        self._planned_tails = 0
        self.padding_sampler = Sampler(PADDING_SAMPLE_EVERY)
        self._swa_found: list[tuple[str, str, torch.Tensor]] = []
        # (watch.label, full buffer, SWA write buffer) pairs I9 checks after each populate.
        self._pairs: list[tuple[str, torch.Tensor, torch.Tensor]] = []
        self._populate_site: str | None = None

    def discover(self) -> None:
        """Wrap what the runner holds now and was not wrapped yet: its input buffers (the
        runner itself, or objects it holds, with a populate method) and what one capture
        run calls."""
        config = self.checks.config
        patch = self.checks.patcher.wrap_method
        runner = self.runner
        candidates = [runner, *getattr(runner, "__dict__", {}).values()]
        for owner in candidates:
            if id(owner) in self.checks.populate_owners or isinstance(owner, (type, torch.Tensor)):
                continue
            name = first_present(owner, config.populate_methods, method=True)
            if name is not None:
                self._owners[id(owner)] = owner
                self.checks.populate_owners.add(id(owner))
                patch(owner, name, self.wrap_populate(owner))
        if not self.run_wrapped:
            target = _run_target(runner, config.capture_run_methods)
            if target is not None:
                patch(*target, self.wrap_run)
                self.run_wrapped = True

    def wrap_capture(self, original: Callable[..., Any]) -> Callable[..., Any]:
        checks = self.checks

        def capture(*args: Any, **kwargs: Any) -> Any:
            self.discover()
            runs_known = self.run_wrapped
            checks.enter_capture()
            if not runs_known:
                checks.begin_capture_run()
            try:
                result = original(*args, **kwargs)
            except BaseException:
                if not runs_known:
                    checks.end_scope(ok=False)
                checks.leave_capture()
                raise
            if not runs_known:
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
        """Input buffers are also looked for in the dictionaries the owner holds (a buffer
        registry's slots), which the runner's own scan leaves alone (its captured
        graphs and batches)."""
        self._location_buffers[id(owner)] = AttributeScan(
            owner, _is_location_buffer, into_dicts=True
        )
        self._swa_buffers[id(owner)] = AttributeScan(owner, self._is_swa, into_dicts=True)

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            """After a populate: the static SWA buffers' dtype (I3), then the padded tails
            (I4) unless the stream is capturing. It runs on every graph decode step, so
            its common path is this one function: the buffers found by the last scans
            (their namespaces compared by identity), the token counts, the padding plan
            for the shape, and in ``fast`` the tails concatenated into the next ring slot
            of the device flags."""
            counts = _token_counts(parameters(original), owner, self.runner)
            name = getattr(original, "__name__", "populate")
            self._populate_sites[id(owner)] = definition(original)
            self._populate_site = self._populate_sites[id(owner)]
            checks = self.checks
            location_scan = self._location_buffers[id(owner)]
            plans: dict[tuple[int, int], PaddingPlan] = {}
            self._plans[id(owner)] = plans
            cat = torch.cat
            fast = not checks.full
            sampler = self.padding_sampler
            self._rescan(owner)
            when = f"after {name}"

            def populate(*args: Any, **kwargs: Any) -> Any:
                result = original(*args, **kwargs)
                if not self._batch_locs_registered:
                    self._register_batch_locs()
                if not unchanged(self._watched[id(owner)]):
                    self._rescan(owner)
                if checks.write_dtypes is None:  # the batch's SWA locations set the convention
                    self._teach_dtypes(args, kwargs)
                self._check_dtypes(self._swa_found, when)
                # Nothing goes to the device while the stream is capturing. Asking CUDA
                # costs microseconds, so only within the runner's ``capture``: a runner
                # captures its graphs there (that is how it was recognised).
                if checks.capture_depth and is_capturing():
                    return result
                raw, padded = counts(args, kwargs)
                if raw is None:
                    raw = self._raw_from_batch(args, kwargs)
                if raw is None:
                    return result
                if padded is not None:
                    checks.replay_rows = (raw, padded)
                if self._pairs:  # I9 on the live rows; the tail is I4's
                    self._check_translations(raw)
                if padded is None or padded <= raw:
                    return result
                plan = plans.get((raw, padded))
                if fast and plan is not None and not sampler.due():
                    return result  # a shape seen before, not sampled this time
                found = location_scan.found
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
            if not self._replayed:  # what a runner watched before its __init__ holds now
                self._replayed = True
                self.discover()
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
        for scan in self._swa_buffers.values():
            scan.tensors()  # rescans what was rebound
        self._collect_swa()
        self._check_dtypes(self._swa_found, when)

    def _check_dtypes(self, found: list[tuple[str, str, torch.Tensor]], when: str) -> None:
        checks = self.checks
        for label, name, t in found:
            role = role_of_name(name)
            allowed = checks.dtypes.allowed(role)
            if allowed is not None:
                checks.dtype_checks += 1
                if t.dtype not in allowed:
                    checks.flag_dtype(t, f"{self.label}.{label} ({when})", role, static=True)
            else:
                checks.check_dtype(t, f"{self.label}.{label} ({when})", role, static=True)

    def _teach_dtypes(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """The SWA locations of the batch a populate copies in: per-batch values, which set
        an auto convention the static buffers are then judged by (``dtype_roles``)."""
        batch = batch_argument(args, kwargs)
        if batch is not None:
            for name, t in self.checks.names.scan_batch(batch)[1]:
                self.checks.check_dtype(t, f"forward_batch.{name}", role_of_name(name))

    def _check_translations(self, raw: int) -> None:
        """I9: each SWA write-location buffer's live rows translate the full ones'."""
        mapping = self.checks.mapping_for(self.runner)
        if mapping is None or raw <= 0:
            return
        scope_id = self.checks.scope.scope_id
        check = self.checks.translation.check_rows
        for label, full, swa in self._pairs:
            check(label, mapping, full, swa, raw, scope_id, self._populate_site)

    def _rescan(self, owner: object) -> None:
        """Rescan the SWA buffers and ``owner``'s location buffers, and note the namespaces
        the scans looked at (the input buffers are usually one of the runner's), each
        once: what populate compares for a rebinding."""
        locations = self._location_buffers[id(owner)]
        scans = [*self._swa_buffers.values(), locations]
        seen: dict[int, tuple[dict[str, Any], tuple[Any, ...]]] = {}
        for scan in scans:
            scan.rescan()
            for snapshot in scan.snapshots:
                seen.setdefault(id(snapshot[0]), snapshot)
        self._watched[id(owner)] = list(seen.values())
        self._collect_swa()

    def _collect_swa(self) -> None:
        """The SWA buffers the scans found, each tensor once, and the pairs I9 checks: each
        SWA write-location buffer with the full write-location buffer it translates (the
        batch location it is named after, ``out_cache_loc_swa`` of ``out_cache_loc``, or
        the only one)."""
        found: dict[int, tuple[str, str, torch.Tensor]] = {}
        for scan in self._swa_buffers.values():
            for entry in scan.found:
                found.setdefault(id(entry[2]), entry)
        self._swa_found = list(found.values())
        batch_names = self.checks.names.batch_loc_names
        fulls = [
            (name, t)
            for scan in self._location_buffers.values()
            for _, name, t in scan.found
            if name in batch_names and t.dim() == 1
        ]
        pairs = []
        for label, name, t in self._swa_found:
            if role_of_name(name) != WRITE or t.dim() != 1:
                continue
            named = [full for full_name, full in fulls if full_name in name]
            full = named[0] if named else (fulls[0][1] if len(fulls) == 1 else None)
            if full is not None and full is not t:
                pairs.append((f"{self.label}.{label}", full, t))
        self._pairs = pairs

    def _raw_from_batch(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
        """The real token count of a populate call that says nothing: the batch's own."""
        batch = batch_argument(args, kwargs)
        locs = self.checks.names.batch_locs(batch) if batch is not None else []
        return locs[0].numel() if locs else None

    def _compare_tails(self, owner: object, plan: PaddingPlan, raw: int, padded: int) -> None:
        """``full``: every location buffer's padded tail points at the sentinel, read now."""
        for label, buffer, tail in plan.tails:
            if tail is None:
                tail = buffer.reshape(-1)[raw:padded]
            where = tail.ne(SENTINEL_SLOT).nonzero().reshape(-1)[: V.MAX_VALUES]
            if where.numel():
                name = f"{type(owner).__qualname__}.{label}"
                self.checks.record(
                    V.PADDING_NOT_ZEROED,
                    f"{name}: padded tail [{raw}:{padded}] holds "
                    f"non-sentinel slots at positions {[raw + i for i in where.tolist()]} "
                    f"after the populate defined at {self._populate_sites[id(owner)]}, called "
                    f"from {V.call_site()}; padded tokens write their KV there",
                    values=tail[where].tolist(),
                    site=self._populate_sites[id(owner)],
                    picture=self._tail_picture(name, buffer, raw, padded),
                )

    def _tail_picture(self, name: str, buffer: torch.Tensor, raw: int, padded: int) -> V.Picture:
        """A populated buffer's last rows up to ``padded``, for a report: the SWA buffer
        beside the full one it translates (each live row's expected translation), any
        other location buffer with its padded rows' sentinel only (read for a violation)."""
        start = max(padded - V.MAX_PICTURE_ROWS, 0)
        actual = buffer.reshape(-1)[start:padded].tolist()
        padding = [SENTINEL_SLOT if start + i >= raw else V.UNKNOWN for i in range(len(actual))]
        full = [V.UNKNOWN] * len(actual)
        expected = padding
        paired = next((f for _, f, swa in self._pairs if swa is buffer), None)
        mapping = self.checks.mapping_for(self.runner) if paired is not None else None
        if paired is not None and mapping is not None and paired.numel() >= padded:
            full = paired.reshape(-1)[start:padded].tolist()
            translated = mapping[paired.reshape(-1)[start:padded].long()].tolist()
            expected = [
                t if p == V.UNKNOWN else p for t, p in zip(translated, padding, strict=True)
            ]
        return V.Picture(
            name,
            first_row=start,
            raw=raw,
            full=tuple(full),
            expected=tuple(expected),
            actual=tuple(actual),
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
        scans = [*self._swa_buffers.values(), *self._location_buffers.values()]
        return {
            "scan_snapshot_values": sum(scan.snapshot_size() for scan in scans),
            "flag_slot_handles": len(self._slots),
            "tail_views": self._planned_tails,
        }

    def _slot(self, owner: object, label: str, buffer: torch.Tensor) -> tuple[DeviceFlags, int]:
        key = (id(owner), label)
        slot = self._slots.get(key)
        if slot is None or slot[0].device != buffer.device or segment_size(slot) < buffer.numel():
            site = self._populate_sites[id(owner)]
            slot = self._slots[key] = self.checks.flags.slot(
                f"{type(owner).__qualname__}.{label}", buffer, lambda: site
            )
        return slot


def _is_location_buffer(name: str, value: torch.Tensor) -> bool:
    return LOCATION_WORD in name and value.dim() >= 1


def _run_target(runner: object, run_methods: tuple[str, ...]) -> tuple[object, str] | None:
    """What one capture/warm-up run calls: the runner's run method (``run_once``), else
    (SGLang, where ``run_once`` is a closure) the forward of ``runner.model_runner.model``."""
    name = first_present(runner, run_methods, method=True)
    if name is not None:
        return runner, name
    model = getattr(getattr(runner, "model_runner", None), "model", None)
    if model is not None and callable(getattr(model, "forward", None)):
        return model, "forward"
    return None


Counts = Callable[[tuple[Any, ...], dict[str, Any]], tuple[int | None, int | None]]
# Where a count is passed: (positional index or None, parameter name).
Where = tuple[int | None, str]


def _first(params: list[tuple[int | None, str]], names: tuple[str, ...]) -> Where | None:
    """Where the first of ``names`` that populate takes is passed, if it takes one."""
    by_name = dict((name, index) for index, name in params)
    return next(((by_name[name], name) for name in names if name in by_name), None)


def _read(args: tuple[Any, ...], kwargs: dict[str, Any], where: Where | None) -> int | None:
    """The int passed for a parameter (``None`` if not passed, or not an int)."""
    if where is None:
        return None
    index, name = where
    value = args[index] if index is not None and index < len(args) else kwargs.get(name)
    return value if type(value) is int else None


def _attribute_count(names: tuple[str, ...], *sources: object) -> int | None:
    """The first of ``names`` that holds an int among the attributes of ``sources``."""
    for source in sources:
        namespace = getattr(source, "__dict__", {})
        for name in names:
            value = namespace.get(name)
            if type(value) is int:
                return value
    return None


def _token_counts(params: list[tuple[int | None, str]], owner: object, runner: object) -> Counts:
    """``(raw, padded)`` token counts of a populate call (see the module docstring): from
    its arguments, tokens or else requests times tokens per request; only a count it is
    not given at all is read from what it left on its object or the runner. Where each
    count is passed is worked out once: this runs on every graph decode step."""
    raw_tokens = _first(params, RAW_TOKEN_NAMES)
    padded_tokens = _first(params, PADDED_TOKEN_NAMES)
    raw_requests = _first(params, RAW_REQUEST_NAMES)
    padded_requests = _first(params, PADDED_REQUEST_NAMES)
    per_request = _first(params, TOKENS_PER_REQUEST)
    namespaces = [getattr(owner, "__dict__", {}), getattr(runner, "__dict__", {})]
    (per_name,) = TOKENS_PER_REQUEST

    takes_tokens = raw_tokens is not None or padded_tokens is not None

    def counts(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int | None, int | None]:
        raw = padded = None
        if takes_tokens:
            raw = _read(args, kwargs, raw_tokens)
            padded = _read(args, kwargs, padded_tokens)
            if raw is not None and padded is not None:
                return raw, padded
        per = _read(args, kwargs, per_request) if per_request is not None else None
        if per is None:
            for namespace in namespaces:
                per = namespace.get(per_name)
                if type(per) is int:
                    break
            else:
                per = 1
        if raw is None:
            requests = _read(args, kwargs, raw_requests)
            raw = (
                requests * per
                if requests is not None
                else _left(per, RAW_TOKEN_NAMES, RAW_REQUEST_NAMES)
            )
        if padded is None:
            requests = _read(args, kwargs, padded_requests)
            padded = (
                requests * per
                if requests is not None
                else _left(per, PADDED_TOKEN_NAMES, PADDED_REQUEST_NAMES)
            )
        return raw, padded

    def _left(per: int, token_names: tuple[str, ...], request_names: tuple[str, ...]) -> int | None:
        """A count populate was not given, from what it left on its object or the runner."""
        found = _attribute_count(token_names, owner, runner)
        if found is not None:
            return found
        requests = _attribute_count(request_names, owner, runner)
        return None if requests is None else requests * per

    return counts
