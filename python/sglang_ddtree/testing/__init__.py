"""Test-only helpers shipped with the package so spawned sglang processes can import them.
Nothing here is active unless a test sets the environment variable it documents."""
