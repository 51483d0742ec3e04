"""SGLang release wheels from PyPI, downloaded at test time into a cache outside the repo.

``extracted("0.5.23")`` downloads ``sglang==0.5.23`` (``pip download --no-deps``, the
wheel: what users install) into ``$SWACHECK_ENGINES/wheels`` (default
``~/.cache/swacheck/engines``) and extracts its ``sglang/`` package once, atomically (a
temporary folder renamed into place), so concurrent test workers and other tools
sharing the cache never see half a tree. Nothing is installed and nothing lands in
the repository.

A download that fails because PyPI cannot be reached raises :class:`PyPIUnreachable`
(the tests skip on it); any other failure is an error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

CACHE = Path(os.environ.get("SWACHECK_ENGINES", Path.home() / ".cache" / "swacheck" / "engines"))
# pip's messages when the index cannot be reached at all.
UNREACHABLE = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Max retries exceeded",
    "ConnectTimeoutError",
    "ProxyError",
    "No route to host",
)


class PyPIUnreachable(RuntimeError):
    """PyPI (or the configured index) could not be reached to download a release."""


def wheel(version: str) -> Path:
    """The release's wheel in the cache (downloaded if missing)."""
    folder = CACHE / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    found = sorted(folder.glob(f"sglang-{version}-*.whl"))
    if found:
        return found[0]
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--disable-pip-version-check",
                "-q",
                "-d",
                tmp,
                f"sglang=={version}",
            ],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            message = f"pip could not download sglang=={version}: {proc.stderr.strip()[-600:]}"
            if any(marker in proc.stderr for marker in UNREACHABLE):
                raise PyPIUnreachable(message)
            raise RuntimeError(message)
        (downloaded,) = Path(tmp).glob("sglang-*.whl")
        target = folder / downloaded.name
        os.replace(downloaded, target)  # atomic; a concurrent worker's copy is the same file
        return target


def extracted(version: str) -> Path:
    """The folder holding the release's ``sglang/`` package (extracted once)."""
    root = CACHE / f"sglang-{version}-wheel"
    if (root / "sglang").is_dir():
        return root
    archive = wheel(version)
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=CACHE, prefix=f".sglang-{version}-"))
    try:
        with zipfile.ZipFile(archive) as zf:
            members = [
                m for m in zf.namelist() if m.startswith("sglang/") and ".." not in m.split("/")
            ]
            zf.extractall(tmp, members=members)
        try:
            os.rename(tmp, root)
        except OSError:  # another worker got there first: theirs is the same tree
            if not (root / "sglang").is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root
