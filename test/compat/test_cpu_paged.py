"""compat/cpu_paged.py: the paged allocator's decode allocation in torch (CPU engine) against a
per-request reading of the Triton kernel's contract; the extend allocation is upstream's own
``alloc_extend_naive``. (The engine-level check is test/e2e/test_ddtree_cpu.py's page-size test.)"""

from __future__ import annotations

import torch

from sglang_ddtree.compat.cpu_paged import alloc_decode_cpu


def _reference(seq_lens, last_loc, free_pages, page):
    out, k = [], 0
    for n, last in zip(seq_lens, last_loc):
        if (n - 1) % page == 0:  # the new token (position n - 1) opens a page: the next free one
            out.append(free_pages[k] * page)
            k += 1
        else:
            out.append(last + 1)
    return out


def test_decode_allocation_opens_pages_in_request_order():
    g = torch.Generator().manual_seed(0)
    for page in (2, 16, 64):
        seq_lens = torch.randint(1, 5 * page, (9,), generator=g)
        last_loc = torch.randint(0, 1000, (9,), generator=g) * page + (seq_lens - 2) % page
        free_pages = torch.randperm(50, generator=g) + 20
        out = torch.empty(9, dtype=torch.int64)
        alloc_decode_cpu(seq_lens, last_loc, free_pages, out, 16, page)
        assert out.tolist() == _reference(seq_lens.tolist(), last_loc.tolist(), free_pages.tolist(), page)
