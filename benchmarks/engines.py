"""Real engine source from PyPI releases, downloaded at run time into a cache.

Engine source is never committed: ``ensure(package, version)`` downloads the release
(sdist preferred: pure source, no compiled payload; else a wheel) with pip into
``$SWACHECK_ENGINES`` (default ``~/.cache/swacheck/engines``), extracts its Python
files, and returns the package folder (e.g. ``.../sglang-0.5.23/sglang``). Versions
are PEP 440 strings as PyPI spells them, ``.post`` releases included
(``sglang==0.5.12.post1``): the cache folder is named by the exact version.

The cache is shared by concurrent processes (several engineers' benchmarks and tests):
a release is extracted into a private temporary folder next to its final place and
renamed into place in one step, so a reader sees either no folder or a complete one,
and two writers racing for the same release both end with the same complete folder.

    python benchmarks/engines.py sglang==0.5.23 sglang==0.5.12.post1 vllm==0.33.0
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

CACHE = Path(os.environ.get("SWACHECK_ENGINES", Path.home() / ".cache" / "swacheck" / "engines"))


def _download(spec: str, into: Path) -> Path:
    errors = []
    for binary in (["--no-binary", ":all:"], ["--only-binary", ":all:"]):
        target = Path(tempfile.mkdtemp(dir=into))
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "-q",
                *binary,
                "-d",
                str(target),
                spec,
            ],
            capture_output=True,
            text=True,
        )
        files = sorted(target.iterdir())
        if proc.returncode == 0 and len(files) == 1:
            return files[0]
        errors.append(proc.stderr.strip()[-300:])
    raise RuntimeError(f"pip could not download {spec}: {' | '.join(errors)}")


def _extract_python(archive: Path, dest: Path) -> None:
    """Extract only ``.py`` files (engine trees carry large non-Python payloads)."""
    dest.mkdir(parents=True)
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if name.endswith(".py") and ".." not in name:
                    zf.extract(name, dest)
        return
    with tarfile.open(archive) as tf:
        members = [m for m in tf.getmembers() if m.isfile() and m.name.endswith(".py")]
        for member in members:
            # sdists have one top folder ``name-version/``; drop it
            member.name = member.name.split("/", 1)[1] if "/" in member.name else member.name
        tf.extractall(dest, members=members, filter="data")


def _package_folder(root: Path, package: str) -> Path:
    for candidate in (root / package, root / "python" / package, root / "src" / package):
        if candidate.is_dir():
            return candidate
    raise RuntimeError(f"no {package}/ folder in {root}")


def ensure(package: str, version: str) -> Path:
    """The extracted source folder of ``package==version`` (downloaded once, atomically)."""
    root = CACHE / f"{package}-{version}"
    complete = root / ".complete"
    if root.is_dir() and not complete.exists():
        raise RuntimeError(
            f"{root} is an incomplete extraction (no .complete marker: an older, non-atomic "
            "engines.py was interrupted or is still writing it); delete it and run again"
        )
    if not root.is_dir():
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=CACHE, prefix=f".{root.name}.") as tmp:
            staging = Path(tmp) / "tree"
            _extract_python(_download(f"{package}=={version}", Path(tmp)), staging)
            _package_folder(staging, package)  # a release without the package is an error
            (staging / ".complete").touch()  # also what earlier versions of this module read
            try:
                staging.rename(root)
            except OSError:
                # another process renamed its complete copy into place first
                if not root.is_dir():
                    raise
    return _package_folder(root, package)


if __name__ == "__main__":
    for spec in sys.argv[1:]:
        name, _, ver = spec.partition("==")
        print(ensure(name, ver))
