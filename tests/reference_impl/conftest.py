"""Run the Triton kernels under the interpreter when there is no GPU.

``TRITON_INTERPRET`` must be set before triton is first imported, hence here,
at conftest import time.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
