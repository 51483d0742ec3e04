"""A test session: ``swacheck server`` as a subprocess, driven over stdio by pygls'
own :class:`~pygls.lsp.client.LanguageClient`.

The client records what the server sends (diagnostics, log and shown messages,
capability registrations) and lets a test wait for a notification instead of
sleeping: :meth:`Session.diagnostics` returns once the server has published the
diagnostics of a given document version.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.protocol import LanguageServerProtocol
from pygls.uris import from_fs_path

T = TypeVar("T")
# Generous: CI machines are shared, and a wait ends as soon as the notification comes.
TIMEOUT_S = 60.0
SERVER = (sys.executable, "-m", "swacheck", "server")


def uri_of(path: Path) -> str:
    uri = from_fs_path(str(path))
    assert uri is not None
    return uri


def capabilities(
    encodings: Sequence[str] = ("utf-16",),
    resolve: bool = False,
    watch: bool = True,
    progress: bool = True,
) -> types.ClientCapabilities:
    """What an editor like VS Code or Neovim announces, as far as the server reads it
    (``watch=False``: a client that cannot watch files for the server; ``progress=False``:
    one that shows no work-done progress)."""
    return types.ClientCapabilities(
        window=types.WindowClientCapabilities(work_done_progress=progress),
        general=types.GeneralClientCapabilities(
            position_encodings=[types.PositionEncodingKind(e) for e in encodings]
        ),
        workspace=types.WorkspaceClientCapabilities(
            workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True),
            did_change_watched_files=types.DidChangeWatchedFilesClientCapabilities(
                dynamic_registration=watch
            ),
        ),
        text_document=types.TextDocumentClientCapabilities(
            code_action=types.CodeActionClientCapabilities(
                resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"])
                if resolve
                else None,
            ),
            hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown]),
        ),
    )


class _Client(LanguageClient):
    """pygls' client, keeping the server's exit status."""

    exit_code: int | None = None

    async def server_exit(self, server: asyncio.subprocess.Process) -> None:
        self.exit_code = server.returncode


class Session:
    """One server process and the client talking to it."""

    def __init__(self, protocol_cls: type[LanguageServerProtocol] = LanguageServerProtocol) -> None:
        self.client = _Client("swacheck-tests", "0", protocol_cls=protocol_cls)
        self.published: list[types.PublishDiagnosticsParams] = []
        self.logs: list[types.LogMessageParams] = []
        self.shown: list[types.ShowMessageParams] = []
        self.registrations: list[types.Registration] = []
        # Work-done progress: the tokens the server created, then what it said of each.
        self.progress_tokens: list[str] = []
        self.progress: list[types.ProgressParams] = []
        # The methods of everything the server sent, in the order it came.
        self.received: list[str] = []
        self.versions: dict[str, int] = {}
        self.texts: dict[str, str] = {}
        self.encoding = "utf-16"
        self._news = asyncio.Event()
        client = self.client

        @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(params: types.PublishDiagnosticsParams) -> None:
            self.published.append(params)
            self.received.append(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
            self._news.set()

        @client.feature(types.WINDOW_LOG_MESSAGE)
        def logged(params: types.LogMessageParams) -> None:
            self.logs.append(params)
            self._news.set()

        @client.feature(types.WINDOW_SHOW_MESSAGE)
        def shown(params: types.ShowMessageParams) -> None:
            self.shown.append(params)
            self.received.append(types.WINDOW_SHOW_MESSAGE)
            self._news.set()

        @client.feature(types.CLIENT_REGISTER_CAPABILITY)
        def registered(params: types.RegistrationParams) -> None:
            self.registrations.extend(params.registrations)
            self._news.set()

        @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def progress_created(params: types.WorkDoneProgressCreateParams) -> None:
            self.progress_tokens.append(str(params.token))
            self.received.append(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
            self._news.set()

        @client.feature(types.PROGRESS)
        def progressed(params: types.ProgressParams) -> None:
            self.progress.append(params)
            self.received.append(types.PROGRESS)
            self._news.set()

    async def start(
        self,
        root: Path,
        options: dict[str, Any] | None = None,
        caps: types.ClientCapabilities | None = None,
        command: Sequence[str] = SERVER,
    ) -> types.InitializeResult:
        """Start the server (``command``) in ``root``, the one workspace folder."""
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        await self.client.start_io(command[0], *command[1:], cwd=root, env=env)
        result = await self.client.initialize_async(
            types.InitializeParams(
                capabilities=caps or capabilities(),
                root_uri=uri_of(root),
                workspace_folders=[types.WorkspaceFolder(uri=uri_of(root), name=root.name)],
                initialization_options=options,
            )
        )
        caps = result.capabilities
        # A peer's answer that lsprotocol cannot read comes as plain JSON names.
        encoding = getattr(caps, "position_encoding", None) or getattr(
            caps, "positionEncoding", None
        )
        self.encoding = str(getattr(encoding, "value", encoding) or "utf-16")
        self.client.initialized(types.InitializedParams())
        return result

    async def stop(self) -> int | None:
        """``shutdown`` then ``exit``; the server's exit status."""
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await asyncio.wait_for(self.client.stop(), TIMEOUT_S)
        return self.client.exit_code

    # -- documents ------------------------------------------------------------------------

    def open(self, path: Path, text: str | None = None) -> str:
        uri = uri_of(path)
        self.texts[uri] = path.read_text(encoding="utf-8") if text is None else text
        self.versions[uri] = 1
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=self.texts[uri]
                )
            )
        )
        return uri

    def change(self, uri: str, text: str) -> int:
        """Send the document's whole new text (the server asks for full sync)."""
        self.versions[uri] += 1
        self.texts[uri] = text
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(
                    uri=uri, version=self.versions[uri]
                ),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        return self.versions[uri]

    def save(self, uri: str) -> None:
        self.client.text_document_did_save(
            types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    def files_changed(self, *changes: tuple[Path, types.FileChangeType]) -> None:
        self.client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                changes=[types.FileEvent(uri=uri_of(p), type=kind) for p, kind in changes]
            )
        )

    # -- waiting --------------------------------------------------------------------------

    async def until(self, found: Callable[[], T | None], timeout: float = TIMEOUT_S) -> T:
        """Wait until ``found()`` returns something (checked after every notification)."""

        async def poll() -> T:
            while (value := found()) is None:
                self._news.clear()
                await self._news.wait()
            return value

        return await asyncio.wait_for(poll(), timeout)

    async def diagnostics(self, uri: str, version: int | None = None) -> list[types.Diagnostic]:
        """The diagnostics published for ``uri`` at ``version`` (default: the latest sent)."""
        wanted = self.versions.get(uri) if version is None else version

        def latest() -> list[types.Diagnostic] | None:
            for params in reversed(self.published):
                if params.uri == uri and params.version == wanted:
                    return list(params.diagnostics)
            return None

        return await self.until(latest)

    async def published_after(
        self, uri: str, count: int, timeout: float = TIMEOUT_S
    ) -> types.PublishDiagnosticsParams:
        """The first diagnostics published for ``uri`` after the first ``count``
        notifications of :attr:`published`."""
        return await self.until(
            lambda: next((p for p in self.published[count:] if p.uri == uri), None), timeout
        )

    async def code_actions(
        self, uri: str, where: types.Range, only: Sequence[str] | None = None
    ) -> list[types.CodeAction]:
        result = await self.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=where,
                context=types.CodeActionContext(diagnostics=[], only=list(only) if only else None),
            )
        )
        return [a for a in result or [] if isinstance(a, types.CodeAction)]


def apply_edit(session: Session, edit: types.WorkspaceEdit | None) -> str:
    """What the editor does with a code action's edit: the document's new text (the
    edit must be for the document's current version)."""
    assert edit is not None and edit.document_changes, edit
    (change,) = edit.document_changes
    assert isinstance(change, types.TextDocumentEdit)
    uri = change.text_document.uri
    assert change.text_document.version == session.versions[uri]
    return apply_text_edits(session.texts[uri], change.edits, session.encoding)


def lsp_lines(text: str) -> list[str]:
    """``text``'s lines as LSP counts them, line ends kept."""
    return [line for line in re.split(r"(?<=\r\n)|(?<=\r)(?!\n)|(?<=\n)", text) if line]


def apply_text_edits(text: str, edits: Sequence[Any], encoding: str = "utf-16") -> str:
    """Apply LSP text edits, positions counted in ``encoding`` code units and lines
    ending at ``\\n``, ``\\r\\n`` or ``\\r`` only (as LSP says; not str.splitlines)."""
    lines = lsp_lines(text)

    def offset(position: types.Position) -> int:
        if position.line >= len(lines):
            return len(text)
        start = sum(len(line) for line in lines[: position.line])
        line = lines[position.line].rstrip("\r\n")
        units = 0
        for column, char in enumerate(line):
            if units >= position.character:
                return start + column
            units += _units(char, encoding)
        return start + len(line)

    spans = sorted((offset(e.range.start), offset(e.range.end), e.new_text) for e in edits)
    for start, end, new in reversed(spans):
        text = text[:start] + new + text[end:]
    return text


def _units(char: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(char.encode("utf-8"))
    if encoding == "utf-32":
        return 1
    return len(char.encode("utf-16-le")) // 2
