"""The worker processes (``engine/workers.py``): none outlives its audit, however the
audit ends (issue 29, item 4), a worker that stops answering is stopped by the
watchdog, and a worker holds no descriptor of its parent's but its own socket.

Each test runs the real command (or the real pool) on a file libcst takes seconds of CPU
to parse, so that a worker is busy in native code when the parent is stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fuzzkit import INT64_SWA, write
from hostile import BOUNDED

from swacheck.config import Config
from swacheck.engine.workers import WorkerPool

# ~8 s of CPU in libcst's native parser at 1,000 links; 2,000 take four times as long.
SLOW = BOUNDED["call_chain_with_arguments"][0].replace(b"(a, b)" * 1000, b"(a, b)" * 2000)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    """Running (a zombie left to be reaped is dead)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _until(found: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s")


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _busy_audit(tmp_path: Path) -> tuple[subprocess.Popen[bytes], list[int]]:
    """``swacheck audit`` with its workers in the middle of a long native parse."""
    write(tmp_path / "slow.py", SLOW)
    write(tmp_path / "zz_ordinary.py", INT64_SWA)
    audit = subprocess.Popen(
        [sys.executable, "-m", "swacheck", "audit", "--no-cache", "--jobs", "2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # As from a terminal: a test run started in the background (`cmd &` in a script,
        # as CI runners do) hands its children SIGINT ignored, and Python keeps it so.
        preexec_fn=_interruptible,
    )
    workers: list[int] = []

    def started() -> bool:
        workers[:] = _children(audit.pid)
        return bool(workers)

    _until(started, 60)
    time.sleep(1.0)  # into libcst's parse
    return audit, workers


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "SIGINT"])
def test_no_worker_outlives_its_audit(tmp_path: Path, how: str) -> None:
    audit, workers = _busy_audit(tmp_path)
    assert all(_alive(pid) for pid in workers)
    audit.send_signal(getattr(signal, how))
    status = audit.wait(timeout=30)
    _until(lambda: not any(_alive(pid) for pid in workers), 5)
    stderr = audit.stderr.read().decode() if audit.stderr else ""
    stdout = audit.stdout.read().decode() if audit.stdout else ""
    assert "Traceback" not in stderr, stderr
    expected = {"SIGKILL": -signal.SIGKILL, "SIGTERM": 143, "SIGINT": 130}[how]
    assert status == expected, (stdout, stderr)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_worker_holds_only_its_own_socket(tmp_path: Path) -> None:
    audit, workers = _busy_audit(tmp_path)
    try:
        for pid in workers:
            targets = {
                int(fd): os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")
            }
            assert targets[0] == targets[1] == os.devnull
            others = {fd: target for fd, target in targets.items() if fd > 2}
            assert [t.split(":")[0] for t in others.values()] == ["socket"], targets
            # Its error output goes to a file of its own (read after a crash for the reason).
            assert "(deleted)" in targets[2] or targets[2].startswith("/tmp"), targets
    finally:
        audit.kill()
        audit.wait()


def test_the_watchdog_stops_a_worker_that_makes_no_progress() -> None:
    """A worker stopped (SIGSTOP) in the middle of a file: its CPU time stands still, so
    the watchdog kills it; the file is answered and a new worker takes the next one.
    (A worker that is merely slow, on a loaded machine, goes on: its CPU time moves.)"""
    from swacheck.rules import all_rules

    pool = WorkerPool(all_rules(), Config(), None, 1, stall=2.0)

    def stop_the_worker() -> None:
        _until(lambda: bool(pool._workers), 30)
        time.sleep(0.5)
        os.kill(pool._workers[0].pid, signal.SIGSTOP)

    stopper = threading.Thread(target=stop_the_worker)
    stopper.start()
    try:
        started = time.monotonic()
        jobs = [(0, "slow.py", SLOW, False), (1, "ok.py", INT64_SWA.encode(), False)]
        found = pool.first_pass(jobs, {})
        assert time.monotonic() - started < 60
        assert found[0].code == "SWA999"
        assert "made no progress for 2 s" in found[0].message
        assert not hasattr(found[1], "code")  # the next file's facts, from a new worker
    finally:
        stopper.join()
        pool.close()


def test_without_fork_the_units_run_in_the_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where ``fork`` does not exist (Windows), the same audit runs in-process."""
    from swacheck.engine.audit import AuditOptions, audit_sources
    from swacheck.rules import all_rules

    monkeypatch.delattr(os, "fork")
    options = AuditOptions(rules=all_rules(), config=Config(), jobs=2)
    result = audit_sources({"bufs.py": INT64_SWA, "ok.py": "x = 1\n"}, options, tmp_path)
    assert [f.code for f in result.findings] == ["SWA002"]


def test_the_default_jobs_follow_the_cores_a_container_grants(tmp_path: Path) -> None:
    from swacheck.engine.cores import _quota, available_cores

    v2 = write(tmp_path / "cpu.max", "150000 100000\n")
    assert _quota(str(v2)) == 2
    assert _quota(str(write(tmp_path / "unlimited", "max 100000\n"))) is None
    quota = write(tmp_path / "quota", "300000\n")
    assert _quota(str(quota), str(write(tmp_path / "period", "100000\n"))) == 3
    assert _quota(str(tmp_path / "missing")) is None
    assert 1 <= available_cores() <= (os.cpu_count() or 1)


def test_a_kept_worker_that_parsed_the_project_is_stopped_not_cleared(tmp_path: Path) -> None:
    """A language server's complete round parses the project in its kept worker, whose
    heap then holds every file's analyses: the round's end stops that worker (the system
    reclaims it at once) rather than have it free them object by object before the next
    edit; an edit's round keeps its worker and the summaries it memoised."""
    import shutil

    from swacheck.engine.workers import RETIRE_AFTER_FILES
    from swacheck.engine.workspace import Workspace
    from swacheck.rules import all_rules

    examples = Path(__file__).resolve().parents[2] / "examples"
    root = tmp_path / "project"
    shutil.copytree(examples, root, ignore=shutil.ignore_patterns("*.md", "__pycache__"))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    for number in range(RETIRE_AFTER_FILES):
        write(root / "layers" / f"layer_{number}.py", f"# layer {number}\n" + INT64_SWA)
    runner = root / "model_runner.py"
    text = runner.read_text()
    others = set(_children(os.getpid()))  # processes earlier tests left behind

    def workers() -> list[int]:
        return [pid for pid in _children(os.getpid()) if pid not in others and _alive(pid)]

    workspace = Workspace(Config(), all_rules(), root=root, cache=False, keep_workers=True)
    try:
        whole = workspace.audit(documents={runner: text}, rescan=False)
        assert whole.facts_parsed > RETIRE_AFTER_FILES
        _until(lambda: not workers(), 10)
        edits = []
        for number in range(3):
            edited = workspace.audit(documents={runner: text + f"# {number}\n"}, rescan=False)
            assert edited.facts_parsed == 1
            assert edited.findings == whole.findings
            edits.append(workers())
        assert len(edits[0]) == 1 and edits[0] == edits[1] == edits[2]
    finally:
        workspace.close()
