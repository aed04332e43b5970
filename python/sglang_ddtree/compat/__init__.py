"""Narrow ``HookRegistry`` hooks for gaps in sglang 0.5.17, one module per gap; each names the
upstream function it wraps and why. ``plugin.register`` registers them."""
