"""Narrow ``HookRegistry`` hooks for gaps in sglang, one module per gap; each names the upstream
function it wraps and why. ``plugin.register`` registers them. ``releases`` names the supported
sglang releases, refuses any other at import, and holds what differs between them."""
