"""Positions between swacheck's findings and the editor.

Findings and their edits use 1-based rows and 0-based *character* columns of the text
the audit read. LSP uses 0-based lines and columns counted in the code units of the
position encoding the client and server agreed on (UTF-16 unless the client offered
UTF-8 or UTF-32 at ``initialize``; pygls makes that choice and its
:class:`~pygls.workspace.PositionCodec` counts the units).

Lines are the engine's rows (:func:`swacheck.engine.fixer.rows`: ``\\n``, ``\\r\\n``,
``\\r``), which is also how LSP counts lines; pygls' own ``TextDocument.lines`` uses
:meth:`str.splitlines`, which also breaks at form feeds and U+2028, so it is not used.
"""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace import PositionCodec

from swacheck.engine.fixer import rows
from swacheck.finding import Position


def _content(line: str) -> str:
    return line.rstrip("\r\n")


class LineIndex:
    """One version of a document's text, for converting positions in both directions."""

    def __init__(self, text: str, codec: PositionCodec) -> None:
        self.text = text
        self.lines: Sequence[str] = rows(text)
        self._codec = codec

    def line(self, row: int) -> str:
        """Row ``row``'s text (1-based) without its line break; ``""`` past the end."""
        return _content(self.lines[row - 1]) if 0 < row <= len(self.lines) else ""

    def to_lsp(self, position: Position) -> types.Position:
        """A finding's position as an LSP position (clamped to the text)."""
        line = position.row - 1
        if line < 0:
            return types.Position(line=0, character=0)
        if line >= len(self.lines):
            # Just past the last line: where an edit appending to the file starts.
            return types.Position(line=len(self.lines), character=0)
        content = _content(self.lines[line])
        column = min(max(position.column, 0), len(content))
        return types.Position(line=line, character=self._codec.client_num_units(content[:column]))

    def to_range(self, start: Position, end: Position) -> types.Range:
        return types.Range(start=self.to_lsp(start), end=self.to_lsp(end))

    def from_lsp(self, position: types.Position) -> Position:
        """An LSP position as a finding's (character columns; clamped to the text)."""
        if position.line >= len(self.lines):
            return Position(len(self.lines) + 1, 0)
        content = _content(self.lines[position.line])
        units = 0
        for column, char in enumerate(content):
            if units >= position.character:
                return Position(position.line + 1, column)
            units += self._codec.client_num_units(char)
        return Position(position.line + 1, len(content))
