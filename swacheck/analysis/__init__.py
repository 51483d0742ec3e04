"""Shared static analysis: name matching, the project-wide class index, control flow.

Rules stay small and declarative on top of these; anything two rules need is here.
"""
