"""Narrow hooks on upstream sglang, each for a named gap in the pinned release (0.5.17)."""
