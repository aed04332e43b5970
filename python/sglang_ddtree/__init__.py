"""sglang-ddtree: DDTree speculative decoding for SGLang, loaded as an sglang plugin."""

__version__ = "0.1.0.dev0"
