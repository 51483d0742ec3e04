"""The audit engine: discover, prefilter, parse, index, check, suppress, fix."""
