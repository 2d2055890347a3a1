"""The designed real-shape construction through vLLM 0.26.0's own loader path and modules, at test scale (same code,
small dims: ``real_shapes.shapes.SMALL``), on CPU in a separate process:

* the loader comes from vLLM's plugin loader (the dist-info ``real_shapes.plugin`` writes) and vLLM's registry, and
  writes every parameter of the target and of each head through the models' own ``load_weights`` (its NaN guard and
  on-device self-check run);
* vLLM's modules (attention written out over a KV list: vLLM's CPU path has no attention without metadata; the MoE
  block written out from FusedMoE's loaded ``w13`` / ``w2``) give the designed greedy token at every position, and
  each head drafts what the design says: the first pass and two chained steps (EAGLE-3 through its ``d2t`` map);
* each check bites: a target lm_head built for the wrong map is refused by the loader itself, and with that check
  switched off the forward oracle catches it; an EAGLE-3 head whose V does not subtract the hidden state's code
  passes its first pass and fails its chained steps; a chained step that cannot see its own KV slot (a drafter bug)
  fails too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")

from portable_spec_harness.context_zoo import reference as R  # noqa: E402
from portable_spec_harness.real_shapes import design as D  # noqa: E402
from portable_spec_harness.real_shapes import plugin  # noqa: E402

PAIRS = ("qwen3moe30b_eagle3", "llama8b_eagle", "llama8b_eagle3")  # MoE first: vLLM makes its EP group from the first config


# ------------------------------------------------------------------ vLLM's modules, attention written out


class KV:
    """One attention layer's keys and values so far (rows in position order), as a paged cache would hold them."""

    def __init__(self):
        self.k, self.v = [], []

    def attend(self, attn, x, pos, *, own_slot: bool = True):
        """vLLM's qkv_proj, q/k norms, rotary_emb and o_proj on new rows ``x`` at ``pos``; causal softmax attention
        over the cached rows and the new ones. ``own_slot=False``: the new rows' K/V never reach the cache."""
        n, hd = x.shape[0], attn.head_dim
        q, k, v = attn.qkv_proj(x)[0].split([attn.q_size, attn.kv_size, attn.kv_size], -1)
        if hasattr(attn, "q_norm"):
            q = attn.q_norm(q.reshape(n, -1, hd)).reshape(q.shape)
            k = attn.k_norm(k.reshape(n, -1, hd)).reshape(k.shape)
        q, k = attn.rotary_emb.forward_native(pos, q, k)
        before = sum(t.shape[0] for t in self.k)
        if own_slot:
            self.k.append(k.view(n, -1, hd).float())
            self.v.append(v.view(n, -1, hd).float())
        keys, values = torch.cat(self.k), torch.cat(self.v)
        out = R.softmax_attention(q.view(n, -1, hd).float(), keys, values, hd ** -0.5,
                                  n_context=before if own_slot else before - 1)
        return attn.o_proj(out.to(x.dtype))[0]

    def prefix(self, rows: int) -> "KV":
        """The cache as it stood after its first ``rows`` rows (each row's K/V depends on that row alone)."""
        kv = KV()
        kv.k, kv.v = [torch.cat(self.k)[:rows]], [torch.cat(self.v)[:rows]]
        return kv


def moe(block, x, top_k: int):
    """Qwen3MoeSparseMoeBlock from its loaded router and FusedMoE weights (w13 = [gate; up], w2 = down)."""
    logits = block.gate(x)[0].float().softmax(-1)
    weights, index = logits.topk(top_k, -1)
    weights = weights / weights.sum(-1, keepdim=True)
    params = {name.rsplit(".", 1)[-1]: p for name, p in block.experts.named_parameters()}
    w13, w2 = params["w13_weight"], params["w2_weight"]
    out = torch.zeros_like(x, dtype=torch.float32)
    for row in range(x.shape[0]):
        for w, e in zip(weights[row], index[row]):
            gate, up = (x[row] @ w13[e].t()).float().chunk(2)
            out[row] += w * ((torch.nn.functional.silu(gate) * up).to(x.dtype) @ w2[e].t()).float()
    return out.to(x.dtype)


def target_forward(tm, ids, pos):
    """The target through its modules: the final normed states and every layer's output (EAGLE-3's aux states)."""
    h, residual, aux = tm.model.embed_tokens(ids), None, []
    for layer in tm.model.layers:
        if residual is None:
            residual, x = h, layer.input_layernorm(h)
        else:
            x, residual = layer.input_layernorm(h, residual)
        x, residual = layer.post_attention_layernorm(KV().attend(layer.self_attn, x, pos), residual)
        h = moe(layer.mlp, x, tm.config.num_experts_per_tok) if hasattr(layer.mlp, "experts") else layer.mlp(x)
        aux.append(h + residual)
    return tm.model.norm(h, residual)[0], aux


class Eagle:
    """A head's passes through its modules: ``first(ids, pos, hidden)`` over many rows, then ``step`` per row."""

    def __init__(self, dm, method: str, aux_ids):
        self.dm, self.method, self.aux_ids, self.kv = dm, method, aux_ids, KV()

    def _layer(self, ids, pos, state, own_slot=True):
        dm, layer = self.dm, self.dm.model.layers[0]
        if self.method == "eagle":
            x = dm.model.fc(torch.cat([dm.model.embed_tokens(ids), state], -1))
            h, residual = layer.post_attention_layernorm(self.kv.attend(layer.self_attn, x, pos, own_slot=own_slot), x)
            out = layer.mlp(h) + residual
            return dm.compute_logits(out).argmax(-1), out
        x = torch.cat([layer.input_layernorm(dm.model.embed_input_ids(ids)), layer.hidden_norm(state)], -1)
        h, residual = layer.post_attention_layernorm(self.kv.attend(layer.self_attn, x, pos, own_slot=own_slot),
                                                     state)
        out, prenorm = dm.model.norm(layer.mlp(h), residual)
        return dm.compute_logits(out).argmax(-1), prenorm

    def first(self, ids, pos, hidden, aux):
        state = hidden if self.method == "eagle" else self.dm.combine_hidden_states(
            torch.cat([aux[i] for i in self.aux_ids], -1))
        return self._layer(ids, pos, state)

    def step(self, token, pos, state, own_slot=True):
        return self._layer(torch.tensor([token]), torch.tensor([pos]), state[None], own_slot)


# ------------------------------------------------------------------------------------ the subprocess


def _inject(bug: str):
    """Patch the construction (in this process) the way ``bug`` says; returns the patchers to stop."""
    from unittest import mock

    patchers = []
    if bug.startswith("target_lm_head"):
        def wrong_head(make, successor=None):  # built for f(f(t)): the greedy token one step ahead
            d = make.design
            f = make.index(D.tables(d).f)
            w = make.zeros(d.vocab_size, d.hidden_size).index_add_(0, f[f], make.embeddings())
            return w.mul_(d.logit / d.hidden_size)
        patchers.append(mock.patch.object(D, "target_lm_head", wrong_head))
    if bug == "target_lm_head_unchecked":
        patchers.append(mock.patch.object(D, "self_check", lambda *a, **k: {"skipped": True}))
    if bug == "eagle3_no_subtraction":
        real = D.eagle3_attention

        def no_subtraction(make, cfg):
            w = real(make, cfg)
            w["v_proj"][:, cfg["hidden_size"]:] = 0
            return w
        patchers.append(mock.patch.object(D, "eagle3_attention", no_subtraction))
    for p in patchers:
        p.start()
    return patchers


def _held(model, role: str, design) -> dict:
    """What the loader's self-check reads from vLLM's parameters for ``role`` (one rank: whole tensors)."""
    from portable_spec_harness.vllm_door.designed_loader import _loaded_tensors

    return _loaded_tensors(dict(model.named_parameters()), role, design)


def _check_pair(name: str, root: Path, engine_config, bug: str) -> dict[str, bool]:
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import get_model

    from portable_spec.errors import PortableSpecError
    from portable_spec_harness.real_shapes import build_pair, load, serve_args

    path = build_pair(name, "designed", root / name, scale="small")
    info = load(path)
    marker, design = D.read_marker(info["target"])
    tables = D.tables(design)
    results: dict[str, bool] = {}
    prompt = [design.words + 1, 5, 4000, design.words - 1, 17, design.words + 40, 3, 1234]  # specials too
    seq = prompt + D.continuation(design, prompt, 24)
    ids, pos = torch.tensor(seq), torch.arange(len(seq))
    tm = None
    for variant in D.VARIANTS:
        args = serve_args(path, variant, k=3)
        vc = engine_config({"target": info["target"],
                            "speculative_config": json.loads(args[args.index("--speculative-config") + 1])})
        vc.load_config.load_format = args[args.index("--load-format") + 1]
        with set_current_vllm_config(vc), torch.inference_mode():
            if tm is None:
                try:
                    tm = get_model(vllm_config=vc)
                except PortableSpecError as exc:
                    return {f"{name}: loader accepted the target": False, f"{name}: refusal": "miss" in str(exc)}
                results[f"{name}: loader accepted the target"] = True
                results[f"{name}: the loader checks vLLM's own target tensors"] = sorted(_held(tm, "target", design)) \
                    == ["embed_tokens", "lm_head"]
                hidden, aux = target_forward(tm, ids, pos)
                greedy = tm.compute_logits(hidden).argmax(-1)
                want = tables.f[ids]
                results[f"{name}: target greedy is f at {len(seq)} positions"] = bool((greedy == want).all())
            dm = get_model(vllm_config=vc, model_config=vc.speculative_config.draft_model_config)
            if not dm.has_own_embed_tokens:  # what the proposer's load_model does
                dm.model.embed_tokens = tm.model.embed_tokens
            if not dm.has_own_lm_head:
                dm.lm_head = tm.lm_head
            method = info["method"]
            results[f"{name}/{variant}: the loader checks vLLM's own head tensors"] = sorted(
                _held(dm, method, design)) == (["lm_head"] if method == "eagle3" else [])
            results[f"{name}/{variant}: draft class"] = type(dm).__name__ == {
                "eagle": "EagleLlamaForCausalLM", "eagle3": "Eagle3LlamaForCausalLM"}[method]
            g = D.draft_successor(design, variant)
            head = Eagle(dm, method, range(3))
            first, states = head.first(ids[1:], pos[:-1], hidden[:-1], [a[:-1] for a in aux])
            first_pass = head.kv  # every row's K/V: what the first pass over rows 0 .. r leaves is its first r + 1
            rows = range(len(prompt) - 1, len(seq) - 1)  # inputs from the first generated token on: all in C
            results[f"{name}/{variant}: first pass drafts g at {len(rows)} rows"] = all(
                int(first[r]) == int(g[seq[r + 1]]) for r in rows)
            chained, wanted = [], []
            for r in rows[::3]:  # two chained steps from every third row, on the head's own drafts
                token, state = int(first[r]), states[r]
                head.kv = first_pass.prefix(r + 1)  # was a first pass again over rows 0 .. r, for these rows
                for s in (1, 2):
                    draft, out = head.step(token, r + s, state, own_slot=bug != "chain_without_own_slot")
                    chained.append(int(draft[0]))
                    wanted.append(int(g[token]))
                    token, state = int(draft[0]), out[0]
            results[f"{name}/{variant}: chained drafts g at {len(chained)} steps"] = chained == wanted
    return results


BUG_PAIRS = {"clean": PAIRS, "target_lm_head_refused": ("llama8b_eagle",),
             "target_lm_head_unchecked": ("llama8b_eagle",), "eagle3_no_subtraction": ("llama8b_eagle3",),
             "chain_without_own_slot": ("llama8b_eagle", "llama8b_eagle3")}


def _run(root: str) -> dict[str, dict[str, bool]]:
    """Every run (clean, then each bug) in this one process: vLLM's groups are made once, from the first config."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("zoo_tests", Path(__file__).with_name("test_model_zoo.py"))
    zoo_tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zoo_tests)
    engine_config = zoo_tests.vllm_cpu_session()
    from vllm.plugins import load_general_plugins

    load_general_plugins()  # registers the loader from the dist-info on PYTHONPATH (VLLM_PLUGINS names it)
    runs: dict[str, dict[str, bool]] = {}
    for bug, names in BUG_PAIRS.items():
        patchers = _inject(bug)
        try:
            runs[bug] = {}
            for name in names:
                runs[bug].update(_check_pair(name, Path(root) / bug, engine_config, bug))
        finally:
            for p in patchers:
                p.stop()
    return runs


def checked_in_subprocess(script: str, flag: str, root: Path) -> dict:
    """``python script flag root`` on CPU with the designed loader's plugin on PYTHONPATH (and only it allowed):
    the JSON object it printed last."""
    env = {**os.environ, **plugin.plugin_env(root / "plugin"), "CUDA_VISIBLE_DEVICES": "",
           "VLLM_PLUGINS": plugin.ENTRY_POINT, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, script, flag, str(root)], env=env, capture_output=True, text=True,
                          timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(lines[-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    pytest.importorskip("vllm")
    return checked_in_subprocess(__file__, "--real-shapes-cpu-check", tmp_path_factory.mktemp("real_shapes_cpu"))


def test_vllms_loader_and_modules_give_the_designed_tokens_and_drafts(runs):
    clean = runs["clean"]
    assert len(clean) == 3 * len(PAIRS) + 4 * 2 * len(PAIRS) and all(clean.values()), clean
    assert all(any(f"{n}: target greedy" in k for k in clean) for n in PAIRS)


def test_a_wrong_target_lm_head_is_refused_by_the_loader_and_caught_by_the_oracle(runs):
    assert runs["target_lm_head_refused"] == {"llama8b_eagle: loader accepted the target": False,
                                              "llama8b_eagle: refusal": True}
    unchecked = runs["target_lm_head_unchecked"]
    assert unchecked["llama8b_eagle: loader accepted the target"] is True
    assert unchecked["llama8b_eagle: target greedy is f at 32 positions"] is False


def test_an_eagle3_head_without_the_hidden_subtraction_fails_only_its_chained_steps(runs):
    failed = sorted(k for k, ok in runs["eagle3_no_subtraction"].items() if not ok)
    assert failed == sorted(f"llama8b_eagle3/{v}: chained drafts g at 16 steps" for v in D.VARIANTS), failed


def test_a_chained_step_without_its_own_kv_slot_misdrafts_on_the_eagle3_head_only(runs):
    failed = sorted(k for k, ok in runs["chain_without_own_slot"].items() if not ok)
    assert failed == sorted(f"llama8b_eagle3/{v}: chained drafts g at 16 steps" for v in D.VARIANTS), failed
    assert len(runs["chain_without_own_slot"]) == 22  # EAGLE-1's layer adds nothing: no attention to miss


if __name__ == "__main__":
    if sys.argv[1:2] == ["--real-shapes-cpu-check"]:
        print(json.dumps(_run(sys.argv[2])), flush=True)
