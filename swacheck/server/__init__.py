"""``swacheck server``: a language server (LSP over stdio) for editors.

Needs the ``lsp`` extra (``pip install 'swacheck[lsp]'``: pygls and lsprotocol); the
command line imports :func:`swacheck.server.app.serve` only when asked to serve.
"""
