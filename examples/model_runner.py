"""A forward dispatcher with the bug of SGLang PR #26152: only the eager path invalidates."""


class ModelRunner:
    def __init__(self, token_to_kv_pool, graph_runner, is_hybrid_swa: bool):
        self.token_to_kv_pool = token_to_kv_pool
        self.graph_runner = graph_runner
        self.is_hybrid_swa = is_hybrid_swa

    def _forward_raw(self, forward_batch, can_run_graph: bool):
        if can_run_graph:
            # BUG: replay builds attention metadata with last forward's cached translation
            return self.graph_runner.replay(forward_batch)
        if self.is_hybrid_swa:
            self.token_to_kv_pool.invalidate_loc_cache()
        self.attn_backend.init_forward_metadata(forward_batch)
        return self.model.forward(forward_batch)

    def prepare_batch(self, forward_batch):
        # Once per batch: the SWA write locations, in the int32 the SWA KV store takes.
        forward_batch.out_cache_loc_swa = self.token_to_kv_pool.translate_loc_from_full_to_swa(
            forward_batch.out_cache_loc
        ).int()
