"""``swacheck server``: the language server (LSP over stdio) on pygls.

Protocol glue only: which notification starts an audit (:mod:`.schedule`), where it
runs (:mod:`.worker`, on the project's warm workspace, :mod:`.projects`), and how its
findings reach the editor (:mod:`.diagnostics`, :mod:`.actions`, :mod:`.hover`).

- ``didOpen``/``didSave``/``didClose``, file changes on disk and a settings change
  audit at once; ``didChange`` is debounced. Each round audits every open document
  (unchanged ones cost a lookup) and publishes the diagnostics of those whose version
  or findings changed, unless the document moved on meanwhile (a newer round follows).
- ``workspace/didChangeWatchedFiles`` is forwarded to the workspaces, which re-read
  only those files; a changed ``pyproject.toml`` is read again, and a project whose
  configuration changed gets a new workspace. A client that cannot watch files for the
  server (no dynamic registration) reports nothing: then every audit looks at every
  file of the project.
- A rule that raised is logged (``window/logMessage``) with the file and the rule; the
  other rules' diagnostics are published as usual.
- A cold start (a project not read in full yet) publishes the open documents'
  diagnostics first, in the context of what the cache holds of the project, then audits
  again with every file of the project read, showing work-done progress (``$/progress``,
  or a message where the client shows none) meanwhile and saying when the project is
  indexed (``window/showMessage``). A document with no finding in that first round gets
  no diagnostics until the project is read: an empty list would read as "clean" where a
  finding may need a file not read yet.
- Every request is answered (:class:`SwacheckProtocol`): one whose parameters do not
  read as the protocol says (a negative line, a position that is a string) gets an
  ``InvalidParams`` error, one after ``shutdown`` an ``InvalidRequest`` error, where
  pygls would answer nothing and the client would wait forever.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from cattrs import ClassValidationError, transform_error
from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.exceptions import JsonRpcException, JsonRpcInvalidRequest
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from swacheck import __version__
from swacheck.engine.fixer import fixable
from swacheck.server import actions, hover
from swacheck.server.diagnostics import report
from swacheck.server.documents import Report, Snapshot
from swacheck.server.positions import LineIndex
from swacheck.server.progress import WorkDone
from swacheck.server.projects import CONFIG_FILES, IGNORE_FILES, Audited, Projects
from swacheck.server.schedule import Debouncer
from swacheck.server.settings import Settings, read_settings
from swacheck.server.worker import Worker

logger = logging.getLogger(__name__)

PYTHON_SUFFIXES = (".py", ".pyi")
# Files a cold start has yet to read (or to parse for their facts) from which the open
# documents' diagnostics are shown first, before the project's: fewer come about as fast
# in full (reading 64 files takes milliseconds, parsing 64 of SGLang's a few seconds).
EARLY_ROUND_FILES = 64
_WATCHERS = ("**/*.py", *(f"**/{name}" for name in (*CONFIG_FILES, *IGNORE_FILES)))


class _Answered:
    """A request already answered with an error while it was read: nothing to handle."""

    jsonrpc = "2.0"


class SwacheckProtocol(LanguageServerProtocol):
    """pygls' protocol, answering every request and keeping nothing per notification.

    Built on pygls 2's private hooks (pinned below 3): a request whose parameters fail
    to read raises inside the JSON decoder, where pygls logs it and answers nothing; one
    after ``shutdown`` is dropped; and each notification handled by a generator (every
    ``textDocument/did*``) leaves its future in ``_request_futures`` for good.
    """

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if "id" not in data or "method" not in data:
                raise  # a notification (nothing to answer) or a response
            why = exc.__cause__
            if isinstance(why, ClassValidationError):
                why = "; ".join(transform_error(why))
            exc.message = f"{exc.message} for {data['method']}: {why or exc}"[:2000]
            self._send_response(data["id"], None, exc.to_response_error())
            return _Answered()

    def handle_message(self, message: Any) -> None:
        if isinstance(message, _Answered):
            return
        method, request_id = getattr(message, "method", None), getattr(message, "id", None)
        if self._shutdown and method not in (None, "exit") and request_id is not None:
            error = JsonRpcInvalidRequest(f"{method}: the server is shutting down")
            self._send_response(request_id, None, error.to_response_error())
            return
        super().handle_message(message)

    def _check_handler_result(self, future: Any) -> None:
        """A notification's handler is done: its future is let go."""
        for key, pending in list(self._request_futures.items()):
            if pending is future:
                del self._request_futures[key]
                break
        super()._check_handler_result(future)


class SwacheckServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "swacheck",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Full,
            protocol_cls=SwacheckProtocol,
        )
        self.settings = Settings()
        self.projects = Projects([])
        self.worker = Worker()
        self.debouncer = Debouncer(self.audit_round, self.settings.debounce_ms / 1000)
        # The last published report of each open document, by its uri as the client sent it.
        self.reports: dict[str, Report] = {}
        self.shutdown_requested = False
        # Documents saved since the last round: their diagnostics are published anew.
        self.saved: set[str] = set()
        # The messages of the last round (errors, warnings, configuration problems).
        self.said: set[str] = set()

    # -- documents ------------------------------------------------------------------------

    def document(self, uri: str) -> TextDocument | None:
        """The open document ``uri`` (``None`` if it is not open)."""
        return self.workspace.text_documents.get(unquote(uri))

    def snapshots(self) -> list[Snapshot]:
        """The current version of every open Python file."""
        taken = []
        for doc in self.workspace.text_documents.values():
            path = to_fs_path(doc.uri) if doc.uri.startswith("file:") else None
            if path is None:
                continue
            if doc.language_id != "python" and not path.endswith(PYTHON_SUFFIXES):
                continue
            taken.append(Snapshot(doc.uri, Path(path), doc.version, doc.source))
        return taken

    def current(self, uri: str) -> Report | None:
        """The report of ``uri``'s current version, if the last round audited it."""
        doc = self.document(uri)
        found = self.reports.get(doc.uri) if doc is not None else None
        return found if found is not None and found.snapshot.version == doc.version else None

    # -- audits ---------------------------------------------------------------------------

    async def audit_round(self) -> None:
        snapshots = self.snapshots()
        if not snapshots:
            return
        if not await self.worker.run(lambda: self.projects.cold(snapshots)):
            await self._audit_and_publish(snapshots)
            await self.worker.run(self.projects.settle)
            return
        # A cold start: the open documents first, in the context of what is known of their
        # projects (cached facts), then again once every file of the project is read. A
        # partial first round is shown only where the second has many files to read: a
        # small project's full diagnostics come about as soon.
        started = time.monotonic()
        audited = await self._audit_and_publish(
            snapshots,
            complete=False,
            shown=lambda first: not first.partial or first.left_out >= EARLY_ROUND_FILES,
        )
        if audited is not None and audited.partial:
            progress = WorkDone(self, "swacheck")
            await progress.begin("reading the project")
            if not progress.shown:
                self.say(
                    "swacheck: reading the project; until it is read, the open files show "
                    "only the findings known so far",
                    types.MessageType.Info,
                    show=True,
                )
            try:
                audited = await self._audit_and_publish(snapshots, progress=progress)
            finally:
                progress.end("done")
        seconds = time.monotonic() - started
        for root, files in audited.indexed if audited is not None else ():
            self.say(
                f"swacheck: indexed {root or 'the open files'}: {files} files read for their "
                f"facts in {seconds:.1f} s",
                types.MessageType.Info,
                show=True,
            )
        await self.worker.run(self.projects.settle)

    async def _audit_and_publish(
        self,
        snapshots: list[Snapshot],
        complete: bool = True,
        progress: WorkDone | None = None,
        shown: Callable[[Audited], bool] | None = None,
    ) -> Audited | None:
        """One audit of ``snapshots``; their diagnostics published where they changed
        (where ``shown`` holds for the round, if given)."""
        codec = self.workspace.position_codec

        def job() -> tuple[Audited, dict[str, Report]]:
            audited = self.projects.audit(snapshots, complete=complete, progress=progress)
            reports = {
                s.uri: report(s, audited.findings[s.uri], codec)
                for s in snapshots
                if s.uri in audited.findings
            }
            return audited, reports

        try:
            audited, reports = await self.worker.run(job)
        except Exception as exc:
            self.say(f"swacheck: the audit failed: {exc}", types.MessageType.Error, show=True)
            self.say(traceback.format_exc(), types.MessageType.Log)
            return None
        if shown is not None and not shown(audited):
            return audited
        problems, errors, warnings = audited.problems, audited.errors, audited.warnings
        for snapshot in snapshots:
            doc = self.document(snapshot.uri)
            if doc is None or doc.version != snapshot.version:
                continue  # closed, or edited since: a newer round follows
            new = reports.get(snapshot.uri)
            old = self.reports.get(snapshot.uri)
            if new is None:
                # Its configuration cannot be read: what was shown may no longer hold.
                self.reports.pop(snapshot.uri, None)
                self.publish(snapshot.uri, snapshot.version, [])
                continue
            if snapshot.uri in audited.unsettled and not new.diagnostics:
                continue  # not known yet: nothing, rather than a "clean" that may be wrong
            self.reports[snapshot.uri] = new
            if (
                snapshot.uri in self.saved
                or old is None
                or old.snapshot.version != new.snapshot.version
                or old.diagnostics != new.diagnostics
            ):
                self.publish(snapshot.uri, snapshot.version, new.diagnostics)
            self.saved.discard(snapshot.uri)
        # Said once while they last: every round of a broken rule or config has them.
        error, warning = types.MessageType.Error, types.MessageType.Warning
        messages = [
            (f"swacheck: configuration error: {p}", error, True)
            for p in dict.fromkeys(problems.values())
        ]
        messages += [(f"swacheck: {e}", error, False) for e in errors]
        messages += [(f"swacheck: warning: {w}", warning, False) for w in warnings]
        for text, kind, show in messages:
            if text not in self.said:
                self.say(text, kind, show)
        self.said = {text for text, _, _ in messages}
        return audited

    def publish(
        self, uri: str, version: int | None, diagnostics: Sequence[types.Diagnostic]
    ) -> None:
        params = types.PublishDiagnosticsParams(
            uri=uri, diagnostics=list(diagnostics), version=version
        )
        self.text_document_publish_diagnostics(params)

    def say(self, message: str, kind: types.MessageType, show: bool = False) -> None:
        """Log ``message`` to the client (and show it in a pop-up)."""
        self.window_log_message(types.LogMessageParams(type=kind, message=message))
        if show:
            self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    # -- edits ----------------------------------------------------------------------------

    def workspace_edit(self, report: Report, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
        """An edit of one version of a document (versioned where the client allows)."""
        snapshot = report.snapshot
        caps = self.client_capabilities
        if get_capability(caps, "workspace.workspace_edit.document_changes", False):
            document = types.OptionalVersionedTextDocumentIdentifier(
                uri=snapshot.uri, version=snapshot.version
            )
            change = types.TextDocumentEdit(text_document=document, edits=edits)
            return types.WorkspaceEdit(document_changes=[change])
        return types.WorkspaceEdit(changes={snapshot.uri: edits})

    async def fix_all(self, report: Report) -> types.WorkspaceEdit | None:
        """The edit applying every fix to the document (``None``: nothing changes)."""
        context = [s for s in self.snapshots() if s.uri != report.snapshot.uri]
        unsafe = self.settings.unsafe_fixes
        fixed = await self.worker.run(lambda: self.projects.fix(report.snapshot, context, unsafe))
        if fixed is None:
            return None
        return self.workspace_edit(report, actions.fix_all_edits(report, fixed))

    # -- settings -------------------------------------------------------------------------

    def apply_settings(self, value: object) -> None:
        self.settings, problems = read_settings(value, self.settings)
        for problem in problems:
            self.say(f"swacheck: {problem}", types.MessageType.Warning, show=True)
        self.debouncer.delay_s = self.settings.debounce_ms / 1000


def build_server() -> SwacheckServer:
    server = SwacheckServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: SwacheckServer, params: types.InitializeParams) -> None:
        ls.apply_settings(params.initialization_options)
        folders = [f.uri for f in params.workspace_folders or ()]
        if not folders and params.root_uri:
            folders = [params.root_uri]
        paths = [Path(p) for uri in folders if (p := to_fs_path(uri)) is not None]
        ls.projects = Projects(paths, ls.settings.configuration)

    @server.feature(types.INITIALIZED)
    def initialized(ls: SwacheckServer, params: types.InitializedParams) -> None:
        caps = ls.client_capabilities
        if not get_capability(
            caps, "workspace.did_change_watched_files.dynamic_registration", False
        ):
            return  # unwatched: every audit looks at every file of the project
        watchers = list(_WATCHERS)
        if ls.settings.configuration is not None:
            watchers.append(f"**/{ls.settings.configuration.name}")
        options = types.DidChangeWatchedFilesRegistrationOptions(
            watchers=[types.FileSystemWatcher(glob_pattern=glob) for glob in watchers]
        )
        registration = types.Registration(
            id="swacheck-watched-files",
            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=options,
        )
        ls.client_register_capability(types.RegistrationParams(registrations=[registration]))
        ls.projects.watched = True

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: SwacheckServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.debouncer.now()

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: SwacheckServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.debouncer.edited()

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: SwacheckServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.saved.add(params.text_document.uri)
        ls.debouncer.now()

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: SwacheckServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        if ls.reports.pop(uri, None) is not None:
            ls.publish(uri, None, [])
        # The file on disk is the project's context again for the other documents.
        ls.debouncer.now()

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def did_change_watched_files(
        ls: SwacheckServer, params: types.DidChangeWatchedFilesParams
    ) -> None:
        paths = [Path(p) for change in params.changes if (p := to_fs_path(change.uri))]
        await ls.worker.run(lambda: ls.projects.files_changed(paths))
        ls.debouncer.now()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: SwacheckServer, params: types.DidChangeConfigurationParams
    ) -> None:
        settings = params.settings
        if isinstance(settings, dict) and "swacheck" in settings:
            ls.apply_settings(settings["swacheck"])
            configuration = ls.settings.configuration
            await ls.worker.run(lambda: ls.projects.reconfigure(configuration))
            ls.debouncer.now()

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def did_change_folders(
        ls: SwacheckServer, params: types.DidChangeWorkspaceFoldersParams
    ) -> None:
        paths = [Path(p) for f in ls.workspace.folders.values() if (p := to_fs_path(f.uri))]
        await ls.worker.run(lambda: ls.projects.set_folders(paths))
        ls.debouncer.now()

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[actions.QUICK_FIX, actions.FIX_ALL], resolve_provider=True
        ),
    )
    async def code_action(
        ls: SwacheckServer, params: types.CodeActionParams
    ) -> list[types.CodeAction] | None:
        found = ls.current(params.text_document.uri)
        if found is None:
            return None
        only = params.context.only
        offered = actions.quick_fixes(found, params.range, only, ls.workspace_edit)
        unsafe = ls.settings.unsafe_fixes
        if actions.wanted(actions.FIX_ALL, only) and fixable(found.findings, unsafe):
            action = actions.fix_all_action(
                found, {"uri": found.snapshot.uri, "version": found.snapshot.version}
            )
            lazy = get_capability(
                ls.client_capabilities, "text_document.code_action.resolve_support.properties", []
            )
            if "edit" not in lazy:
                action.edit = await ls.fix_all(found)
            if action.edit is not None or "edit" in lazy:
                offered.append(action)
        return offered

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def resolve_code_action(ls: SwacheckServer, action: types.CodeAction) -> types.CodeAction:
        data = action.data if isinstance(action.data, dict) else {}
        found = ls.current(str(data.get("uri", "")))
        fresh = found is not None and found.snapshot.version == data.get("version")
        if action.kind == actions.FIX_ALL and found is not None and fresh:
            action.edit = await ls.fix_all(found)
        return action

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: SwacheckServer, params: types.HoverParams) -> types.Hover | None:
        doc = ls.document(params.text_document.uri)
        if doc is None:
            return None
        found = ls.current(params.text_document.uri)
        lines = (
            found.lines if found is not None else LineIndex(doc.source, ls.workspace.position_codec)
        )
        return hover.hover(hover.codes_at(found, lines, params.position))

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: SwacheckServer, params: None) -> None:
        ls.shutdown_requested = True

    return server


def serve() -> int:
    """Run the server on stdin/stdout until the client says ``exit`` (or goes away).

    Exit status 0 after ``shutdown`` then ``exit``, 1 otherwise (as LSP asks).
    """
    logging.basicConfig(level=logging.WARNING, format="swacheck server: %(message)s")
    server = build_server()
    server.start_io()
    return 0 if server.shutdown_requested else 1
