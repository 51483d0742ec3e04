"""Tensor contracts of the reference implementation, as jaxtyping aliases.

Public boundaries are annotated with these names; the sanitizer can check them
with typeguard. SWA-space locations are int32 everywhere (I3); full-space
locations and the full→SWA mapping are int64. (Aliases, rather than inline
``Int32[Tensor, "n"]``, keep the dimension strings out of annotations.)
"""

from jaxtyping import Float, Int, Int32, Int64
from torch import Tensor

FullLoc = Int64[Tensor, "n"]  # full-pool slots, e.g. out_cache_loc
SwaLoc = Int32[Tensor, "n"]  # SWA-pool slots, e.g. out_cache_loc_swa, translated indices
AnyLoc = Int[Tensor, "n"]  # full-pool slots of either width (translation input)
IndexMapping = Int64[Tensor, "mapping_rows"]  # full_to_swa_index_mapping, last entry -1
ReqToToken = Int32[Tensor, "req_rows ctx"]
IndPtr = Int32[Tensor, "indptr"]  # CSR offsets, one more than requests
SlotList = Int32[Tensor, "listed"]  # CSR slot numbers
PerRequest = Int[Tensor, "bs"]  # one value per request (req_pool_indices, seq_lens, ...)
PerRequest32 = Int32[Tensor, "bs"]
TokenIds = Int64[Tensor, "tokens"]
KVBuffer = Float[Tensor, "slots kv_heads head_dim"]  # one layer of a pool
QHeads = Float[Tensor, "tokens q_heads head_dim"]
KVHeads = Float[Tensor, "tokens kv_heads head_dim"]
Logits = Float[Tensor, "bs vocab"]
