"""metrics.request_spec_metrics: DDTREE's per-request proposed-draft count is the tree size."""

from sglang_ddtree.metrics import request_spec_metrics


def test_proposed_drafts_are_tree_nodes():
    m = {"spec_verify_ct": 10, "spec_num_correct_drafts": 12, "spec_num_proposed_drafts": 150,
         "spec_proposed_drafts": 150, "spec_accept_rate": 0.08}
    request_spec_metrics(m, budget=8)
    assert m["spec_num_proposed_drafts"] == m["spec_proposed_drafts"] == 80
    assert m["spec_accept_rate"] == 12 / 80 and m["ddtree_tree_nodes"] == 8


def test_requests_without_verify_steps_are_left_alone():
    m = {"completion_tokens": 1}
    request_spec_metrics(m, budget=8)
    assert m == {"completion_tokens": 1}
