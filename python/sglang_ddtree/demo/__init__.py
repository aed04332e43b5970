"""The CPU demo's SmolLM2-135M converter and DFlash drafter trainer; never imported by serving code."""
