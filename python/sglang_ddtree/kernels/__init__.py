"""Fast kernels of sglang-ddtree, each beside the plain-torch reference it is tested against."""
