"""``--speculative-algorithm DDTREE``: the algorithm sglang registers and instantiates.

DDTREE is a DFlash-family algorithm (same drafter, target hidden-state capture, draft KV pool),
so its spec class answers the DFlash predicates; sglang then sets everything up as for DFLASH and
instantiates :class:`~sglang_ddtree.worker.DDTreeWorker`. At launch, :meth:`handle_server_args`
runs DFLASH's argument handling, resolves and checks the DDTREE flags, sets the verify width the
scheduler reserves KV for, and reserves GPU memory for the verify graphs.
"""

from __future__ import annotations

import logging

from sglang.srt.speculative.spec_registry import CustomSpecAlgo

from .compat import releases
from .core.widths import verify_width
from .engine.verify_memory import reserve_for_server
from .server_args import (
    ALGORITHM,
    drafter_architectures,
    refuse_dflash2_drafter,
    FRACTION_GIVEN,
    published_drafter_block_size,
    validate_ddtree_args,
    validate_ddtree_parallelism,
)

logger = logging.getLogger(__name__)


class DDTreeSpecAlgo(CustomSpecAlgo):
    def is_dflash(self) -> bool:
        return True

    def is_dflash_family(self) -> bool:
        return True

    def supports_target_verify_for_draft(self) -> bool:
        return True

    def has_draft_kv(self) -> bool:
        return True

    # Called by the scheduler but missing on CustomSpecAlgo in sglang 0.5.17.
    def need_topk(self) -> bool:
        return False

    def carries_draft_hidden_states(self) -> bool:
        return False

    def create_future_map(self, device, req_to_token_pool, needs_cpu_seq_lens=True, needs_confidence_relay=False):
        from sglang.srt.managers.overlap_utils import FutureMap

        return FutureMap(device, self, req_to_token_pool, needs_cpu_seq_lens, needs_confidence_relay)

    def get_num_tokens_per_req_for_target_verify(self, num_draft_tokens: int, is_draft_worker: bool) -> int:
        """The target verifies the tree (``num_draft_tokens`` = the verify width); the drafter
        runs one DFlash block, whose size comes from its own config."""
        if is_draft_worker:
            return published_drafter_block_size()
        return num_draft_tokens

    def handle_server_args(self, server_args) -> None:
        releases.check_ddtree_serves(server_args.device)
        if server_args.speculative_draft_window_size is not None:
            raise ValueError(
                "--speculative-draft-window-size is not supported with --speculative-algorithm "
                "DDTREE yet; remove it."
            )
        validate_ddtree_parallelism(server_args)
        # DFLASH's handling: device, draft path, block size, draft attention backend.
        releases.run_dflash_handling(server_args)
        refuse_dflash2_drafter(drafter_architectures(server_args))
        block_size = int(server_args.speculative_num_draft_tokens)
        validate_ddtree_args(server_args, block_size)
        # The verify width is what the scheduler reserves KV for each step.
        server_args.speculative_num_draft_tokens = verify_width(server_args.speculative_ddtree_budget, block_size)
        reserve_for_server(server_args, block_size, getattr(server_args, FRACTION_GIVEN, True))


def register_ddtree() -> None:
    """Register DDTREE with sglang's speculative-algorithm registry (idempotent)."""
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    from sglang.srt.speculative.spec_registry import get_spec

    if get_spec(ALGORITHM) is not None:
        return

    @SpeculativeAlgorithm.register(ALGORITHM, supports_overlap=True, spec_class=DDTreeSpecAlgo)
    def _factory(server_args):
        from .worker import DDTreeWorker

        return DDTreeWorker
