"""An attention backend that hands its SWA layers the full pool's pages (I9) and rebinds
a page table its captured graph reads (I10)."""


class FlashAttentionBackend:
    def init_forward_metadata(self, forward_batch):
        metadata = self.forward_metadata
        metadata.page_table = self.req_to_token[forward_batch.req_pool_indices, : self.max_len]
        # BUG: no full->SWA translation: SWA layers read SWA KV at full-pool page numbers
        metadata.swa_page_table = metadata.page_table
        metadata.swa_out_cache_loc = self._swa_kv_pool.translate_loc_from_full_to_swa(
            forward_batch.out_cache_loc
        )

    def init_forward_metadata_capture_cuda_graph(self, bs):
        # the graph path binds the SWA page table the replay fills from the SWA side
        metadata = self.decode_cuda_graph_metadata[bs]
        metadata.swa_page_table = self.cuda_graph_swa_page_table[:bs]

    def init_forward_metadata_replay_cuda_graph(self, bs):
        metadata = self.decode_cuda_graph_metadata[bs]
        swa_pages = self._swa_kv_pool.translate_loc_from_full_to_swa(metadata.page_table)
        # BUG: a new tensor where the captured graph reads the old one: every replay reads
        # the table of the capture; fill it in place (`metadata.swa_page_table.copy_(...)`)
        metadata.swa_page_table = swa_pages
