"""Reference implementation of a hybrid sliding-window-attention KV cache.

A small, real and correct engine slice (SWA/full KV pools with a memoised
full→SWA translation, a Triton attention backend, a CUDA-graph runner and a
tiny hybrid model checked against a dense oracle) on which the sanitizer is
proven. ``inject_bug=`` switches re-create each historical SGLang bug in the
real code path. Its modules import torch (and triton, for the kernels); the
linter never imports them.
"""
