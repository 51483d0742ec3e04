"""An attention backend that reads the pool's per-batch `swa_loc` (the #24138 review's hazard)."""


class TRTLLMMHABackend:
    def __init__(self, swa_kv_pool):
        self._swa_kv_pool = swa_kv_pool

    def _get_layer_cache_loc(self, layer, forward_batch):
        # BUG: a stale batch's locations when this batch did not call set_swa_loc()
        if self._swa_kv_pool.swa_loc is not None:
            return self._swa_kv_pool.swa_loc
        return self._swa_kv_pool.translate_loc_from_full_to_swa(forward_batch.out_cache_loc)
