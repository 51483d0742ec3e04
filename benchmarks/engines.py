"""Real engine source from PyPI releases, downloaded at run time into a cache.

Engine source is never committed: ``ensure(package, version)`` downloads the release
(sdist preferred: pure source, no compiled payload) with pip into
``$SWACHECK_ENGINES`` (default ``~/.cache/swacheck/engines``), extracts its Python
files, and returns the package folder (e.g. ``.../sglang-0.5.23/sglang``).

    python benchmarks/engines.py sglang==0.5.23 vllm==0.33.0
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
    for binary in (["--no-binary", ":all:"], ["--only-binary", ":all:"]):
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
                str(into),
                spec,
            ],
            capture_output=True,
            text=True,
        )
        files = sorted(into.iterdir())
        if proc.returncode == 0 and files:
            return files[0]
    raise RuntimeError(f"pip could not download {spec}: {proc.stderr.strip()[-500:]}")


def _extract_python(archive: Path, dest: Path) -> None:
    """Extract only ``.py`` files (engine trees carry large non-Python payloads)."""
    dest.mkdir(parents=True, exist_ok=True)
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


def ensure(package: str, version: str) -> Path:
    """The extracted source folder of ``package==version`` (downloaded once)."""
    root = CACHE / f"{package}-{version}"
    marker = root / ".complete"
    if not marker.exists():
        with tempfile.TemporaryDirectory() as tmp:
            archive = _download(f"{package}=={version}", Path(tmp))
            _extract_python(archive, root)
        marker.touch()
    for candidate in (root / package, root / "python" / package, root / "src" / package):
        if candidate.is_dir():
            return candidate
    raise RuntimeError(f"no {package}/ folder in {root}")


if __name__ == "__main__":
    for spec in sys.argv[1:]:
        name, _, ver = spec.partition("==")
        print(ensure(name, ver))
