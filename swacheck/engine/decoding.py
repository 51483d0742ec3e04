"""A source file's bytes as the text CPython compiles (PEP 263 declarations, the UTF-8 BOM).

``tokenize.detect_encoding``, and libcst, which calls it, split lines at ``\\n`` alone and
decode the first line as UTF-8 before they look for a declaration. So a file CPython
compiles was refused: a ``# -*- coding: latin-1 -*-`` file with CR-only line ends and a
non-ASCII byte (its whole text is "the first line"), or one whose first line is a latin-1
comment and whose second declares latin-1. Everything that turns a file's bytes into
text goes through :func:`decode_source` instead, which reads them as CPython's string
tokenizer does (``decode_str``, ``check_coding_spec``, ``get_coding_spec`` and
``get_normal_name`` in CPython's ``Parser/tokenizer``): line ends are ``\\r\\n``, ``\\r``
or ``\\n``; the declaration is looked for in the first line, and in the second only when
the first is blank or a comment; a BOM allows no declaration but UTF-8. CPython decodes
a UTF-8 file token by token and never decodes its comments, so bytes there that are not
UTF-8 pass: such a file is read too, each of those bytes as U+FFFD, and is not
rewritten (:attr:`Decoded.lossy`).

That is how ``compile()`` and ``import`` read a file. ``python file.py`` reads it through
CPython's file tokenizer, which also refuses bytes that are not UTF-8 before the
declaration or in a UTF-8 file's comments; where the two disagree, this follows
``compile()``.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass

BOM = b"\xef\xbb\xbf"

# A declaration: a comment line (only blanks before its ``#``) holding ``coding:`` or
# ``coding=`` and a name. ASCII classes only, as CPython's C scan.
_DECLARATION = re.compile(rb"[ \t\f]*#[^\r\n]*?coding[:=][ \t]*([-\w.]+)", re.ASCII)
# A first line after which CPython looks at the second: blank, or a comment.
_BLANK_OR_COMMENT = re.compile(rb"[ \t\f]*(?:#|\Z)")
_LINE_END = re.compile(rb"\r\n|\r|\n")
# Codecs under which bytes and text agree on every line end (``\r``, ``\n`` are those
# bytes and no others' part): decoding before or after CPython's line-end translation
# gives the same text. Named as :func:`_normal_name` leaves them.
_LINE_SAFE = frozenset({"utf-8", "iso-8859-1"})
LOSSY = "the file's comments hold bytes that are not UTF-8: it is not rewritten"
# ``surrogateescape``'s stand-ins for undecodable bytes, each made U+FFFD.
_ESCAPES = {code: 0xFFFD for code in range(0xDC80, 0xDD00)}


class UndecodableSource(ValueError):
    """CPython would refuse the bytes before parsing them; the message is its reason."""


@dataclass(frozen=True)
class Decoded:
    # The text, line ends as in the file, without the BOM.
    text: str
    # The codec it was decoded with, as CPython names it (``utf-8`` with a BOM too).
    encoding: str
    bom: bool
    # Bytes in comments that are not UTF-8 were read as U+FFFD: the text is not the file's.
    lossy: bool = False

    def encode(self, text: str) -> bytes:
        """``text`` (an edit of :attr:`text`) as the file's bytes: same codec, same BOM.
        :class:`UndecodableSource` for a :attr:`lossy` text, whose bytes it cannot give."""
        if self.lossy:
            raise UndecodableSource(LOSSY)
        return (BOM if self.bom else b"") + text.encode(self.encoding)


def _normal_name(name: str) -> str:
    """CPython's ``get_normal_name``: the UTF-8 and Latin-1 spellings made one."""
    folded = name[:12].lower().replace("_", "-")
    if folded == "utf-8" or folded.startswith("utf-8-"):
        return "utf-8"
    latin = ("latin-1", "iso-8859-1", "iso-latin-1")
    if folded in latin or folded.startswith(tuple(f"{spelling}-" for spelling in latin)):
        return "iso-8859-1"
    return name


def declared_encoding(data: bytes) -> str | None:
    """The encoding ``data``'s first two lines declare (normalised), ``None`` if none."""
    lines = _LINE_END.split(data.removeprefix(BOM), maxsplit=2)[:2]
    for number, line in enumerate(lines):
        match = _DECLARATION.match(line)
        if match is not None:
            return _normal_name(match.group(1).decode("ascii"))
        if number == 0 and not _BLANK_OR_COMMENT.match(line):
            break
    return None


def source_encoding(data: bytes) -> str:
    """The codec CPython decodes ``data`` with; :class:`UndecodableSource` where a BOM
    and the declaration disagree."""
    declared = declared_encoding(data)
    if data.startswith(BOM):
        if declared not in (None, "utf-8"):
            raise UndecodableSource(f"encoding problem: {declared} with BOM")
        return "utf-8"
    return declared or "utf-8"


def decode_source(data: bytes) -> Decoded:
    """``data`` as CPython reads it before parsing; :class:`UndecodableSource` with
    CPython's reason (an unknown or non-text codec, bytes the codec rejects) otherwise."""
    encoding = source_encoding(data)
    bom = data.startswith(BOM)
    body = data[len(BOM) :] if bom else data
    try:
        try:
            text = body.decode(encoding)
        except UnicodeDecodeError:
            if encoding != "utf-8" or not _compiles(data):
                raise
            # Bytes CPython never decodes (in comments): one U+FFFD each, so every
            # position still counts one character per byte there.
            text = body.decode(encoding, "surrogateescape").translate(_ESCAPES)
            return Decoded(text, encoding, bom, lossy=True)
        if encoding not in _LINE_SAFE and b"\r" in body:
            # CPython translates line ends in the bytes, then decodes: in a codec whose
            # bytes hold ``\r`` inside other characters (UTF-16), that is other text.
            translated = _LINE_END.sub(b"\n", body).decode(encoding)
            if translated != re.sub(r"\r\n|\r", "\n", text):
                raise UndecodableSource(
                    f"encoding problem: {encoding} does not keep line ends as bytes"
                )
    except (LookupError, UnicodeDecodeError) as exc:  # LookupError: unknown, or not text
        raise UndecodableSource(str(exc)) from None
    return Decoded(text, encoding, bom)


def _compiles(data: bytes) -> bool:
    """CPython's verdict on ``data``: whether it compiles (to a tree only)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def decode_lossy(data: bytes) -> str:
    """``data`` as text for showing it: its declared codec where there is a usable one,
    else UTF-8, undecodable bytes replaced. Never raises."""
    try:
        encoding = source_encoding(data)
        body = data.removeprefix(BOM)
        return body.decode(encoding, errors="replace")
    except (UndecodableSource, LookupError):
        return data.removeprefix(BOM).decode("utf-8", errors="replace")
