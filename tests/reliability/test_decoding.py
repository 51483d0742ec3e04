"""Issue 38: a file's bytes become the text CPython compiles, or CPython's reason not to.

The oracle is CPython itself: ``ast.parse`` of the bytes (what ``compile()`` and
``import`` read) against ``ast.parse`` of :func:`decode_source`'s text. They must agree
on whether the file is Python and, where it is, on every node (string literals show
the decoding). ``tokenize.detect_encoding``, which swacheck and libcst used, refused
files CPython compiles: a declaration in a file with CR-only line ends, a non-UTF-8
comment on the line before the declaration.
"""

from __future__ import annotations

import ast
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swacheck.engine.decoding import BOM, UndecodableSource, decode_source


def cpython(data: bytes | str) -> str | None:
    """CPython's tree of ``data`` as text, ``None`` if it refuses the source."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.dump(ast.parse(data))
    except (SyntaxError, ValueError):
        return None


def ours(data: bytes) -> str | None:
    """The tree of the text swacheck decodes ``data`` to, ``None`` if it refuses it."""
    try:
        return cpython(decode_source(data).text)
    except UndecodableSource:
        return None


CASES = {
    "the issue's file: latin-1 declared, CR line ends": b"# -*- coding: latin-1 -*-\rx = '\xe9'\r",
    "latin-1 comment before the declaration": b"# \xe9\n# coding: latin-1\nx = '\xe9'\n",
    "both, CR": b"# \xe9\r# coding: latin-1\rx = '\xe9'\r",
    "cp1252 after a shebang, CR": b"#!/usr/bin/python\r# coding: cp1252\rx = '\x80'\r",
    "euc-jp, CR": b"# coding: euc-jp\rx = '\xa4\xa2'\r",
    "shift_jis, CR": b"# coding: shift_jis\rk = '\x82\xa0'\r",
    "CRLF": b"# coding: latin-1\r\nx = '\xe9'\r\n",
    "after a blank line": b"\n# coding: latin-1\nx = '\xe9'\n",
    "after blanks and a form feed": b" \t\x0c\n# coding: latin-1\nx = '\xe9'\n",
    "vim's spelling": b"# vim: set fileencoding=latin-1 :\nk = '\xe9'\n",
    "no space, =": b"#coding=latin-1\nk = '\xe9'\n",
    "two declarations: the first counts": b"# coding: latin-1 coding: utf-8\nk = '\xe9'\n",
    "latin_1 and upper case": b"# coding: LATIN_1\nk = '\xe9'\n",
    "utf-8-sig is utf-8": b"# coding: utf-8-sig\nx = 1\n",
    "BOM and utf-8 declared": BOM + b"# coding: utf-8\nx = '\xc3\xa9'\n",
    "BOM, CR": BOM + b"# c\rx = '\xc3\xa9'\r",
    "no final newline": b"# coding: latin-1\nx = '\xe9'",
    "declaration on a last line without newline": b"#\n# coding: latin-1 \xe9",
    "an empty declaration, then one": b"# coding: \n# coding: latin-1\nx = '\xe9'\n",
    # CPython decodes a UTF-8 file's tokens, not its comments.
    "latin-1 bytes in a UTF-8 file's comments": b"# caf\xe9\nx = 1  # \xff\n",
    "a UTF-8-encoded surrogate in a comment": b"x = 1  # \xed\xa0\x80\n",
    # Refused, as CPython refuses them.
    "third line is too late": b"#!\n#\n# coding: latin-1\nx = '\xe9'\n",
    "after code is too late": b"x = 1\n# coding: latin-1\ny = '\xe9'\n",
    "no colon": b"# coding latin-1\nx = '\xe9'\n",
    "in a string": b"x = '# coding: latin-1'\ny = '\xe9'\n",
    "BOM and latin-1": BOM + b"# coding: latin-1\nx = 1\n",
    "unknown encoding": b"# coding: klingon\nx = 1\n",
    "not a text encoding": b"# coding: rot13\nk = 1\n",
    "UTF-16 declared": b"# coding: utf-16\nx = 1\n",
    "UTF-16-LE declared, CR": b"# coding: utf-16-le\rk = 1\r",
    "ascii declared, non-ASCII": b"# coding: ascii\nx = '\xe9'\n",
    "utf-8 declared, latin-1 bytes": b"# coding: utf-8\nx = '\xe9'\n",
    "latin-1 bytes in a name": b"caf\xe9 = 1\n",
    "EBCDIC": b"# coding: cp037\nx = 1\n",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_case_is_read_as_cpython_reads_it(name: str) -> None:
    data = CASES[name]
    assert ours(data) == cpython(data)


def test_bytes_in_comments_are_read_but_never_written_back() -> None:
    """Each non-UTF-8 byte of a comment is one U+FFFD (positions count one character per
    byte), and the text cannot be encoded back: a fix would change bytes it never read."""
    decoded = decode_source(b"# caf\xe9\xe9\nx = 1\n")
    assert decoded.text == "# caf\ufffd\ufffd\nx = 1\n" and decoded.lossy
    with pytest.raises(UndecodableSource, match="not rewritten"):
        decoded.encode(decoded.text)


def test_refusals_give_cpython_s_reason() -> None:
    reasons = {
        "BOM and latin-1": "encoding problem: iso-8859-1 with BOM",
        "unknown encoding": "unknown encoding: klingon",
        "not a text encoding": "'rot13' is not a text encoding",
        "utf-8 declared, latin-1 bytes": "'utf-8' codec can't decode byte 0xe9",
    }
    for name, reason in reasons.items():
        with pytest.raises(UndecodableSource, match=reason):
            decode_source(CASES[name])


DECLARATIONS = st.sampled_from(
    [
        b"# -*- coding: %s -*-",
        b"# coding=%s",
        b"#coding:%s",
        b"  # vim: set fileencoding=%s :",
        b"# coding %s",  # not one
        b"x = 1  # coding: %s",  # not one: code before the comment
    ]
)
ENCODINGS = st.sampled_from(
    ["latin-1", "LATIN_1", "iso-8859-1", "utf-8", "utf8", "cp1252", "euc-jp", "ascii", "klingon"]
)
OTHER_LINES = st.sampled_from([b"", b"#!/usr/bin/env python", b"# caf\xe9", b"\x0c", b"x = 2"])
BODIES = st.sampled_from(["é", "€", "あ", "plain"])
NEWLINES = st.sampled_from([b"\n", b"\r\n", b"\r"])


@settings(max_examples=300, deadline=None)
@given(
    bom=st.booleans(),
    first=OTHER_LINES,
    declaration=DECLARATIONS,
    encoding=ENCODINGS,
    second_line=st.booleans(),
    body=BODIES,
    body_codec=st.sampled_from(["latin-1", "utf-8", "cp1252", "euc-jp"]),
    newline=NEWLINES,
    final_newline=st.booleans(),
)
def test_generated_files_are_read_as_cpython_reads_them(
    bom: bool,
    first: bytes,
    declaration: bytes,
    encoding: str,
    second_line: bool,
    body: str,
    body_codec: str,
    newline: bytes,
    final_newline: bool,
) -> None:
    """Declarations of every spelling on the first or the second line (after a shebang,
    a blank, a non-UTF-8 comment, or code), with or without a BOM, any line ends, a
    body in a codec that may or may not be the declared one: swacheck's verdict and
    text are CPython's, and the text encodes back to the very bytes."""
    try:
        literal = f"s = {body!r}".encode(body_codec)
    except UnicodeEncodeError:
        literal = b"s = 'plain'"
    lines = [declaration % encoding.encode()]
    if second_line:
        lines.insert(0, first)
    lines.append(literal)
    data = (BOM if bom else b"") + newline.join(lines) + (newline if final_newline else b"")
    assert ours(data) == cpython(data)
    if ours(data) is not None:
        decoded = decode_source(data)
        if decoded.lossy:  # a UTF-8 file's comment holds other bytes: not written back
            assert b"\xe9" in data and decoded.encoding == "utf-8"
            with pytest.raises(UndecodableSource, match="not rewritten"):
                decoded.encode(decoded.text)
        else:
            assert decoded.encode(decoded.text) == data
