"""Reference implementation of the hybrid-SWA KV cache design (see DESIGN.md)."""
