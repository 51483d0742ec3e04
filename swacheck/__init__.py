"""swacheck: keep the hybrid sliding-window-attention KV cache of an inference engine honest.

The base install is the linter (``swacheck audit``); it never imports torch.
``swacheck.runtime`` (the sanitizer) needs the ``runtime`` extra, and
``swacheck.reference_impl`` (``swacheck demo``) the ``reference`` extra.
"""

__version__ = "0.1.0"
