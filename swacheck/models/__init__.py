"""The engines' models (``*.toml``, data read by :mod:`swacheck.semantics.model`) and
the shape they must have (:mod:`swacheck.models.schema`)."""
