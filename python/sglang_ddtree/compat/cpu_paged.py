"""sglang's paged KV allocator (``--page-size`` > 1) on the CPU engine.

sglang 0.5.17's CPU engine cannot serve any page size but 1: the paged allocation runs Triton
kernels, which have no driver for CPU tensors.

1. ``PagedTokenToKVPoolAllocator.alloc_extend`` / ``alloc_decode`` launch
   ``alloc_extend_kernel`` / ``alloc_decode_kernel`` (``sglang.kernels.ops.memory.allocator``).
   The hook replaces the two names in ``sglang.srt.mem_cache.allocator.paged`` with launchers
   that run the same allocation in torch when the tensors are on the CPU (``alloc_extend``:
   upstream's own ``alloc_extend_naive``) and the original kernel otherwise.
2. ``mem_cache.allocation.get_last_loc`` dispatches to its Triton kernel for every attention
   backend but ``ascend`` / ``torch_native`` (the CPU engine's is ``intel_amx``). For CPU tensors
   the hook runs upstream's ``get_last_loc_torch``.
"""

from __future__ import annotations

import torch

_PAGED = "sglang.srt.mem_cache.allocator.paged"


def _cpu_or_kernel(name: str, kernel, cpu):
    """A class standing where ``kernel`` stood (sglang's registry replaces module names by classes
    as they are): ``[grid](*args)`` launches the Triton kernel, or runs ``cpu(*args)`` when the
    tensors are on the CPU."""

    def __class_getitem__(cls, grid):
        def launch(*args, **kwargs):
            if not args[0].is_cuda:
                return cpu(*args, **kwargs)
            return kernel[grid](*args, **kwargs)

        return launch

    return type(name, (), {"__class_getitem__": classmethod(__class_getitem__), "kernel": kernel})


def alloc_extend_cpu(prefix_lens, seq_lens, last_loc, free_pages, out_indices, bs_upper, page_size):
    """``alloc_extend_kernel``'s contract: each request's new slots, first the rest of its last
    page (after ``last_loc``), then whole new pages, then a partial page, new pages taken from
    ``free_pages`` in request order."""
    from sglang.srt.mem_cache.allocator.paged import alloc_extend_naive

    alloc_extend_naive(prefix_lens, seq_lens, last_loc, free_pages, out_indices, page_size, out_indices.device)


def alloc_decode_cpu(seq_lens, last_loc, free_pages, out_indices, bs_upper, page_size):
    """``alloc_decode_kernel``'s contract: one slot per request for token ``seq_len - 1``: after
    ``last_loc`` in its page, or the first slot of the next free page (in request order) when
    that token starts a page."""
    new_page = (seq_lens - 1) % page_size == 0
    order = torch.cumsum(new_page.to(torch.int64), 0) - 1
    fresh = free_pages[order.clamp(min=0)].to(torch.int64) * page_size
    out_indices.copy_(torch.where(new_page, fresh, last_loc.to(torch.int64) + 1))


def _last_loc_on_cpu(original, req_to_token, req_pool_indices_tensor, prefix_lens_tensor):
    if req_to_token.is_cuda:
        return original(req_to_token, req_pool_indices_tensor, prefix_lens_tensor)
    from sglang.srt.mem_cache.allocation import get_last_loc_torch

    return get_last_loc_torch(req_to_token, req_pool_indices_tensor, prefix_lens_tensor)


def register_cpu_paged_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    from sglang.kernels.ops.memory.allocator import alloc_decode_kernel, alloc_extend_kernel

    HookRegistry.register(f"{_PAGED}.alloc_extend_kernel",
                          _cpu_or_kernel("alloc_extend_kernel", alloc_extend_kernel, alloc_extend_cpu), HookType.REPLACE)
    HookRegistry.register(f"{_PAGED}.alloc_decode_kernel",
                          _cpu_or_kernel("alloc_decode_kernel", alloc_decode_kernel, alloc_decode_cpu), HookType.REPLACE)
    HookRegistry.register("sglang.srt.mem_cache.allocation.get_last_loc", _last_loc_on_cpu, HookType.AROUND)
