"""Two-rank tests: on two GPUs NCCL with CUDA graphs, elsewhere gloo with the Triton
interpreter (the ranks inherit ``TRITON_INTERPRET`` from this process)."""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
