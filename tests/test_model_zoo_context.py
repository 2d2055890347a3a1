"""The zoo's pairs that see context (harness/portable_spec_harness/context_zoo, registered in model_zoo).

* the greedy rule, its tables and the prompt set (> 16 KV blocks, shared prefixes, one ending at max_model_len);
* the RoPE position profiles have the gaps the docstrings state;
* every context target, loaded with transformers in float32 and bfloat16, produces the rule's token at every
  position of a 300-token prompt with the stated margin; a wrong position or a dropped KV entry changes its output
  (to the token the construction predicts), where the f-chain target does not notice;
* each head, run by the plain-torch mirror of vLLM's forward (context_zoo.reference) on the saved weights, drafts what
  the construction says, and goes wrong under an injected position / slot / seq_lens / hidden-state bug;
* build_pair / the manifest / the CLI for the new pairs, and vLLM 0.26.0's own loader and modules (bf16, CPU).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")
transformers = pytest.importorskip("transformers")

from safetensors.torch import load_file  # noqa: E402

from portable_spec_harness import model_zoo as zoo  # noqa: E402
from portable_spec_harness.context_zoo import function as F  # noqa: E402
from portable_spec_harness.context_zoo import reference as R  # noqa: E402
from portable_spec_harness.context_zoo import rope_profile  # noqa: E402
from portable_spec_harness.context_zoo.models import DFLASH_TARGET_LAYERS, EAGLE3_AUX_LAYERS  # noqa: E402

FN = F.context_function(0)
PROMPTS = {p["name"]: p for p in F.context_prompts(0)}
FAMILY_OF = {"llama_ctx_eagle": "llama_ctx", "llama_ctx_eagle3": "llama_ctx", "qwen3_ctx_dflash": "qwen3_ctx",
             "deepseek_mla_mtp": "deepseek_mla", "llama_ctx_draft_model": "llama_ctx", "mimo_ctx_mtp": "mimo_ctx"}


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    out = tmp_path_factory.mktemp("ctx_zoo")
    transformers.logging.set_verbosity_error()
    return out, {name: zoo.build_pair(name, out) for name in zoo.CONTEXT_PAIRS}


_CACHE: dict[tuple, object] = {}


@pytest.fixture(scope="module", autouse=True)
def _drop_models():
    yield
    _CACHE.clear()


def _weights(path) -> dict[str, torch.Tensor]:
    key = ("w", str(path))
    if key not in _CACHE:
        _CACHE[key] = {k: v.float() for k, v in load_file(f"{path}/model.safetensors").items()}
    return _CACHE[key]


def _hf(path, dtype=torch.float32):
    key = ("hf", str(path), dtype)
    if key not in _CACHE:
        _CACHE[key] = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()
    return _CACHE[key]


def _rule(seq: list[int]) -> list[int]:
    """The rule's next token after every position of ``seq`` (position 0 is its own previous token)."""
    return [FN.next_token(seq[i - 1] if i else seq[0], seq[i]) for i in range(len(seq))]


def _run(name: str, n_out: int = 12) -> list[int]:
    p = PROMPTS[name]
    return p["prompt_token_ids"] + p["expected_output"][:n_out]


def _hidden_states(path, seq) -> list[torch.Tensor]:
    """HF's hidden states (float32): [embeddings, after layer 0, ..., final normed]."""
    key = ("hs", str(path), tuple(seq))
    if key not in _CACHE:
        with torch.no_grad():
            out = _hf(path)(torch.tensor([seq]), output_hidden_states=True).hidden_states
        _CACHE[key] = [h[0] for h in out]
    return _CACHE[key]


# ------------------------------------------------------------------------------------------- the rule and data


def test_the_rule_tables_and_what_the_heads_rely_on():
    printable = set(zoo.zoo_function(0).cycle)
    assert len(set(FN.table)) == F.TABLE_SIZE == 512 and set(FN.table) <= printable
    assert sorted(FN.phi) == list(range(F.GROUPS)) and all(FN.phi[g] != g for g in range(F.GROUPS))
    seen, g = [], 0
    for _ in range(F.GROUPS):
        seen.append(g)
        g = FN.phi[g]
    assert g == 0 and sorted(seen) == list(range(F.GROUPS))  # one 8-cycle
    for index, t in enumerate(FN.table):
        assert FN.coordinates(t) == (index // 64, index // 8 % 8, index % 8) and FN.A[t] == FN.phi[index // 64]
    out = FN.continuation([zoo.BOS_ID, 50, 60], 1200)
    assert set(out) <= set(FN.table)  # never special, mask or a non-table token
    assert all(FN.A[out[i]] != FN.A[out[i - 1]] for i in range(1, len(out)))  # a neighbour read changes the group
    assert out[512:1024] == out[:512] and len(set(out[:512])) > 400  # period 512, hardly repeating before
    for n in range(3, 60):  # DFlash's two-step identity: x[n + 2] = table[phi(A(x[n]))][B(x[n])]
        assert F.dflash_proposal(FN, out[:n], 3) == [out[n], out[n + 1], out[n + 1]]
    assert FN.from_json(json.loads(json.dumps(FN.as_json()))) == FN
    assert F.context_function(1).table != FN.table


def test_prompts_span_many_kv_blocks_and_give_ragged_batches():
    prompts = F.context_prompts(0, max_model_len=1024, max_tokens=48)
    by = {p["name"]: p for p in prompts}
    assert {"long_300", "long_520", "prefix_0", "prefix_1", "prefix_2", "near_max_len"} <= set(by)
    assert sum(len(p["prompt_token_ids"]) > 16 * 16 for p in prompts) >= 6
    tails = [by[f"prefix_{i}"]["prompt_token_ids"] for i in range(3)]
    assert all(t[:F.SHARED_PREFIX_TOKENS] == tails[0][:F.SHARED_PREFIX_TOKENS] for t in tails)
    assert [len(t) - F.SHARED_PREFIX_TOKENS for t in tails] == [1, 3, 6]
    assert len(by["near_max_len"]["prompt_token_ids"]) + 48 == 1024
    for p in prompts:
        ids = p["prompt_token_ids"]
        assert ids[0] == zoo.BOS_ID and len(ids) >= 3 and zoo.MASK_ID not in ids[1:]
        assert p["expected_output"] == FN.continuation(ids, 48) == zoo.expected_output(FN.as_json(), ids, 48)
    short = F.context_prompts(0, max_model_len=256, max_tokens=16)
    assert all(len(p["prompt_token_ids"]) + 16 <= 256 for p in short) and "long_300" not in {p["name"] for p in short}
    assert F.context_prompts(0) == F.context_prompts(0) != F.context_prompts(1)


@pytest.mark.parametrize("method", ["eagle", "eagle3", "mtp", "dflash"])
def test_simulated_acceptance_is_the_stated_one(method):
    ids = PROMPTS["short_5"]["prompt_token_ids"]
    sim = F.simulate_spec_decode(FN, F.draft_proposer(method), ids, 60, 3)
    assert sim["output"] == FN.continuation(ids, 60)
    rates = [a / sim["num_drafts"] for a in sim["accepted_per_position"]]
    pair = {"dflash": "qwen3_ctx_dflash", "mtp": "deepseek_mla_mtp"}.get(method, "llama_ctx_eagle")
    assert rates == F.expected_acceptance(method, 3) == zoo.expected_acceptance_per_position(method, "perfect", 3,
                                                                                             pair=pair)
    assert F.expected_acceptance("dflash", 1) == [1.0] and F.expected_acceptance("dflash", 5) == [1, 1, 0, 0, 0]


def test_rope_profiles_have_the_documented_peak_gap_and_tilt():
    for profile, (peak, gap, tilt) in ((rope_profile.LLAMA, (155.0, 30.7, 20.0)),
                                       (rope_profile.QNORM, (180.0, 35.7, 23.2)),
                                       (rope_profile.MLA, (147.0, 27.2, 18.6))):
        assert abs(profile.peak() - peak) < 0.06 and abs(rope_profile.gap(profile) - gap) < 0.06
        assert abs(rope_profile.tilt(profile) - tilt) < 0.06
        q, k = rope_profile.patterns(profile, 1)  # the patterns score what score() says, through real RoPE
        pos = torch.arange(6)
        qr = R.rope(q.expand(6, 1, -1).double(), pos, profile.theta, profile.interleaved)[:, 0]
        kr = R.rope(k.expand(6, 1, -1).double(), pos, profile.theta, profile.interleaved)[:, 0]
        if profile.norm is None:
            got = (qr[5] @ kr.t()) * profile.scale
            want = torch.tensor([profile.score(5 - n, 1) for n in range(6)], dtype=torch.float64)
            assert torch.allclose(got, want, atol=1e-3) and got.argmax().item() == 4


# ------------------------------------------------------------------------------------------------- the targets


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("pair", ["llama_ctx_eagle", "qwen3_ctx_dflash", "deepseek_mla_mtp", "mimo_ctx_mtp"])
def test_target_greedy_is_the_rule_at_every_position(ctx, pair, dtype):
    model = _hf(ctx[1][pair]["target"], dtype)
    for name in ("short_5", "long_300"):
        seq = _run(name, 16)
        with torch.no_grad():
            logits = model(torch.tensor([seq])).logits[0].float()
        assert logits.argmax(-1).tolist() == _rule(seq)
        assert R.margin(logits) > 3.9 and abs(logits.max().item() - zoo.LOGIT) < 0.05  # 16 vs <= 12


def _decode_one(model, prompt, *, position=None, mask_out=()):
    """Prefill ``prompt[:-1]`` into a cache, then decode ``prompt[-1]`` at ``position`` (default: its own) with the
    keys at ``mask_out`` hidden; returns the greedy token. The prefill depends on neither: a prompt's is computed once
    and each decode gets a copy of its cache (the decode appends to it)."""
    n = len(prompt) - 1
    key = ("prefill", id(model), tuple(prompt[:-1]))
    with torch.no_grad():
        if key not in _CACHE:
            _CACHE[key] = model(torch.tensor([prompt[:-1]]), use_cache=True).past_key_values
        cache = copy.deepcopy(_CACHE[key])
        mask = torch.ones(1, n + 1, dtype=torch.long)
        for j in mask_out:
            mask[0, j] = 0
        out = model(torch.tensor([prompt[-1:]]), past_key_values=cache, attention_mask=mask,
                    position_ids=torch.tensor([[n if position is None else position]]))
    return out.logits[0, -1].argmax().item()


@pytest.mark.filterwarnings("ignore:`past_key_values` is deprecated")
def test_the_context_target_sees_positions_and_kv_entries_the_old_target_does_not(ctx, tmp_path):
    model = _hf(ctx[1]["llama_ctx_eagle"]["target"])
    seq = _run("long_300", 40)
    checked = 0
    for p in range(300 + 10, 300 + 40):  # decode x_p after its prefix: the rule's token, then under bugs
        cur, prev = seq[p], seq[p - 1]
        if (FN.B1[cur], FN.B2[cur]) == (FN.B1[prev], FN.B2[prev]):
            continue  # a read of the current token's class instead of the previous one's would not show
        truth = FN.next_token(prev, cur)
        reads_own_class = FN.produce(FN.A[cur], FN.B1[cur], FN.B2[cur])
        prompt = seq[:p + 1]
        assert _decode_one(model, prompt) == truth
        # a position off by one: the previous-token head loses its key and, tilted, reads the current token
        assert _decode_one(model, prompt, position=p + 1) == reads_own_class != truth
        # the previous token's KV entry dropped: the same read
        assert _decode_one(model, prompt, mask_out=[p - 1]) == reads_own_class
        # the current token's own key hidden (seq_lens one short): the group comes from the previous token
        assert _decode_one(model, prompt, mask_out=[p]) == FN.produce(FN.A[prev], FN.B1[prev], FN.B2[prev]) != truth
        checked += 1
        if checked == 3:
            break
    assert checked == 3
    old = zoo.build_target("llama", tmp_path)  # the f-chain target: next = f(current), blind to all of it
    f, old_model = zoo.zoo_function(0).f, _hf(old)
    prompt = zoo.expected_continuation(f, [zoo.BOS_ID], 40)
    assert _decode_one(old_model, prompt) == _decode_one(old_model, prompt, position=41) == f[prompt[-1]]
    assert _decode_one(old_model, prompt, mask_out=[len(prompt) - 2]) == f[prompt[-1]]


# ----------------------------------------------------------------------------------------------------- the heads


def _chain(forward, dw, tw, tokens, hidden, steps, recycle=lambda out: out, **kw):
    """First pass over ``tokens``/``hidden``, then ``steps`` chained draft steps (each appends the drafted token and
    the recycled hidden of the last row). Returns (drafts, tokens, hidden) of the last step's input."""
    logits, out = forward(dw, tw, tokens, hidden, **kw)
    drafts = []
    for _ in range(steps):
        drafts.append(logits[-1].argmax().item())
        tokens, hidden = tokens + [drafts[-1]], torch.cat([hidden, recycle(out[-1:])])
        logits, out = forward(dw, tw, tokens, hidden, **kw)
    return drafts + [logits[-1].argmax().item()], tokens, hidden


def _read_by(profile, d0: int, rels: dict[int, int]) -> int:
    """The row a position-only head (peak ``d0`` back) reads among ``{row: query position - key position}``."""
    return max(rels, key=lambda row: profile.score(rels[row], d0))


def _bugs_change_the_last_step(forward, dw, tw, tokens, hidden, truth, profile):
    """A chained step under each injected bug drafts what the construction says the bug reads: the position-only
    heads read the key their RoPE profile ranks first among those left (computed here from the profile)."""
    last = len(tokens) - 1
    y, before = tokens[-1], tokens[-2]  # the step's input and the previous draft position's input

    def draft(**kw):
        return forward(dw, tw, tokens, hidden, **kw)[0][-1].argmax().item()

    def with_b2_of(row):  # the previous-token head read ``row`` instead of the previous draft position
        return FN.produce(FN.A[y], FN.B1[before], FN.B2[tokens[row]])

    assert draft() == truth
    assert draft(stale={last: last - 1}) != truth  # a wrong slot for the step's K/V: A(before) != A(y)
    own_hidden = _read_by(profile, 0, {j: last - j for j in range(last)})  # seq_lens one short
    assert FN.coordinates(draft(hidden_keys=[last]))[0] == FN.A[tokens[own_hidden]] != FN.A[y]
    shifted = list(range(len(tokens)))
    shifted[-1] += 1  # the step's position off by one (its key written there too)
    row = _read_by(profile, 1, {j: last + 1 - j for j in range(last + 1)})
    assert row != last - 1 and draft(positions=shifted) == with_b2_of(row)
    row = _read_by(profile, 1, {j: last - j for j in range(last + 1) if j != last - 1})  # previous entry dropped
    assert draft(hidden_keys=[last - 1]) == with_b2_of(row)


def test_eagle_head_is_right_only_with_hidden_states_positions_and_kv(ctx):
    pair = ctx[1]["llama_ctx_eagle"]
    dw, tw = _weights(pair["draft"]), _weights(pair["target"])
    assert "embed_tokens.weight" not in dw and "lm_head.weight" not in dw  # vLLM shares the target's
    seq = _run("long_300", 12)
    hs = _hidden_states(pair["target"], seq)
    logits, out = R.eagle1_forward(dw, tw, seq[1:], hs[-1][:-1])
    assert logits.argmax(-1).tolist()[1:] == _rule(seq)[2:]  # every row from the second on
    assert R.margin(logits[1:]) > 3.9
    assert (out[1:-1] - hs[-1][2:-1]).abs().max() < 0.02  # the head's output is the target's next hidden state
    # a hidden state from the wrong position: B1 comes from the wrong token
    wrong = R.eagle1_forward(dw, tw, seq[1:], hs[-1][1:])[0].argmax(-1).tolist()[1:]
    assert sum(a != b for a, b in zip(wrong, _rule(seq)[2:])) > 0.6 * len(wrong)
    n = 300
    drafts, tokens, hidden = _chain(R.eagle1_forward, dw, tw, seq[1:n + 1], hs[-1][:n], 4)
    assert drafts == seq[n + 1:n + 6]
    _bugs_change_the_last_step(R.eagle1_forward, dw, tw, tokens, hidden, seq[n + 5], rope_profile.LLAMA)


def test_eagle3_head_with_attention_on_is_right_only_with_hidden_states_positions_and_kv(ctx):
    pair = ctx[1]["llama_ctx_eagle3"]
    dw, tw = _weights(pair["draft"]), _weights(pair["target"])
    cfg = json.loads(open(f"{pair['draft']}/config.json").read())
    assert cfg["eagle_aux_hidden_state_layer_ids"] == EAGLE3_AUX_LAYERS and cfg["architectures"] == [
        "LlamaForCausalLMEagle3"]
    assert dw["midlayer.self_attn.o_proj.weight"].abs().sum() > 0  # attention on
    seq = _run("long_300", 12)
    hs = _hidden_states(pair["target"], seq)  # HF's last entry is normed; fc ignores that copy (aux id 2)
    fc = torch.cat([hs[i] for i in EAGLE3_AUX_LAYERS], -1) @ dw["fc.weight"].t()
    logits, prenorm = R.eagle3_forward(dw, tw, seq[1:], fc[:-1])
    assert logits.argmax(-1).tolist()[1:] == _rule(seq)[2:] and R.margin(logits[1:]) > 3.9
    assert torch.allclose(prenorm.pow(2).mean(-1), torch.full((len(seq) - 1,), 4.0), atol=0.05)  # RMS 2 form
    n = 300
    drafts, tokens, hidden = _chain(R.eagle3_forward, dw, tw, seq[1:n + 1], fc[:n], 4)
    assert drafts == seq[n + 1:n + 6]
    _bugs_change_the_last_step(R.eagle3_forward, dw, tw, tokens, hidden, seq[n + 5], rope_profile.LLAMA)
    # the first pass's hidden from the wrong position
    wrong = R.eagle3_forward(dw, tw, seq[1:], fc[1:])[0].argmax(-1).tolist()[1:]
    assert sum(a != b for a, b in zip(wrong, _rule(seq)[2:])) > 0.6 * len(wrong)


def test_dflash_head_accepts_two_positions_and_needs_the_context_kv(ctx):
    pair = ctx[1]["qwen3_ctx_dflash"]
    dw, tw = _weights(pair["draft"]), _weights(pair["target"])
    assert pair["expected"]["acceptance_per_position"] == [1.0, 1.0, 0.0]
    seq = _run("long_300", 12)
    hs = _hidden_states(pair["target"], seq)
    aux = torch.cat([hs[i + 1] for i in DFLASH_TARGET_LAYERS], -1)  # vLLM: ids + 1
    wrong_slot1 = 0
    for n in range(299, 309):  # context 0..n-1, bonus x_n (x_n+1 on generated by the rule)
        logits = R.dflash_forward(dw, tw, aux[:n], torch.arange(n), seq[n], 3, zoo.MASK_ID)
        assert logits.argmax(-1).tolist() == F.dflash_proposal(FN, seq[:n + 1], 3) == [seq[n + 1], seq[n + 2],
                                                                                       seq[n + 2]]
        assert seq[n + 3] != seq[n + 2] and R.margin(logits) > 3.9
        truth = seq[n + 1]
        stale = aux[:n].clone()
        stale[n - 1] = aux[n - 2]
        for bad in (R.dflash_forward(dw, tw, aux[:n], torch.arange(n) - 1, seq[n], 3, zoo.MASK_ID, query_start=n),
                    R.dflash_forward(dw, tw, aux[:n], torch.arange(n), seq[n], 3, zoo.MASK_ID, hidden_keys=[n - 1]),
                    R.dflash_forward(dw, tw, stale, torch.arange(n), seq[n], 3, zoo.MASK_ID)):
            top = bad[0].topk(2).values
            wrong_slot1 += not (bad[0].argmax().item() == truth and top[0] - top[1] > 1)
    assert wrong_slot1 >= 27  # 30 bugged drafts: slot 1 lost (a stale context token may share the class)


def _mtp_pair(ctx, name: str):
    """An MTP pair: its draft links the target's weights; returns (weights, config, a 300-token run, its hidden
    states)."""
    pair = ctx[1][name]
    assert pair["speculative_config"]["method"] == "mtp"
    assert os.path.realpath(f"{pair['draft']}/model.safetensors") == os.path.realpath(
        f"{pair['target']}/model.safetensors")
    seq = _run("long_300", 12)
    cfg = json.loads(open(f"{pair['target']}/config.json").read())
    return _weights(pair["target"]), cfg, seq, _hidden_states(pair["target"], seq)


def _mtp_head_is_exact(forward, w, seq, hs, profile) -> None:
    """The head drafts the rule from the third row on (vLLM zeroes position 0's embedding) and recycles the target's
    next hidden; chained steps are exact, and each injected cache bug changes the last step as the construction
    says."""
    logits, normed = forward(w, w, seq[1:], hs[-1][:-1])
    assert logits.argmax(-1).tolist()[2:] == _rule(seq)[3:] and R.margin(logits[2:]) > 3.9
    assert (normed[2:-1] - hs[-1][3:-1]).abs().max() < 0.02  # recycled hidden == the target's next hidden
    n = 300
    drafts, tokens, hidden = _chain(forward, w, w, seq[1:n + 1], hs[-1][:n], 4)
    assert drafts == seq[n + 1:n + 6]
    _bugs_change_the_last_step(forward, w, w, tokens, hidden, seq[n + 5], profile)


def _mostly_wrong(drafts: list[int], seq: list[int]) -> bool:
    return sum(a != b for a, b in zip(drafts, _rule(seq)[3:])) > 0.6 * len(drafts)


def test_mtp_head_on_the_mla_target_is_right_only_with_hidden_states_positions_and_kv(ctx):
    w, cfg, seq, hs = _mtp_pair(ctx, "deepseek_mla_mtp")
    assert (cfg["kv_lora_rank"], cfg["qk_rope_head_dim"], cfg["num_nextn_predict_layers"]) == (512, 64, 1)

    def forward(dw, tw, tokens, hidden, **kw):
        return R.mtp_forward(w, cfg, tokens, hidden, **kw)

    _mtp_head_is_exact(forward, w, seq, hs, rope_profile.MLA)


def test_mtp_head_on_the_mimo_target_is_right_only_with_hidden_states_positions_and_kv(ctx):
    """The GQA MTP pair (``MiMoForCausalLM`` + ``mimo_mtp``), as the MLA one; and a wrong input or weight makes most
    drafts wrong: hidden states one position late, the position heads' bias dropped, or MiMo's [hidden | embedding]
    input order taken for DeepSeek's."""
    w, cfg, seq, hs = _mtp_pair(ctx, "mimo_ctx_mtp")
    assert (cfg["architectures"], cfg["num_nextn_predict_layers"], cfg["num_key_value_heads"]) == (
        ["MiMoForCausalLM"], 1, 4)

    def forward(dw, tw, tokens, hidden, **kw):
        return R.mimo_mtp_forward(dw, cfg, tokens, hidden, **kw)

    _mtp_head_is_exact(forward, w, seq, hs, rope_profile.LLAMA)
    assert _mostly_wrong(forward(w, w, seq[1:], hs[-1][1:])[0].argmax(-1).tolist()[2:], seq)
    p = "model.mtp_layers.0"
    no_bias = {**w, f"{p}.self_attn.q_proj.bias": torch.zeros_like(w[f"{p}.self_attn.q_proj.bias"])}
    half = w[f"{p}.input_proj.weight"].shape[1] // 2
    swapped = {**w, f"{p}.input_proj.weight": w[f"{p}.input_proj.weight"].roll(half, 1)}
    for bad in (no_bias, swapped):
        assert _mostly_wrong(forward(bad, bad, seq[1:], hs[-1][:-1])[0].argmax(-1).tolist()[2:], seq)


# --------------------------------------------------------------------------------------- registry, manifest, CLI


def test_build_pair_manifest_and_cli(ctx, tmp_path, capsys):
    out, pairs = ctx
    for name, pair in pairs.items():
        family, method, variants = zoo.PAIRS[name]
        assert family == FAMILY_OF[name] and variants == ("perfect",) and pair["method"] == method
        assert zoo.load_expected(pair["draft"]) == pair["expected"] and pair["expected"]["kind"] == "context"
        assert pair["speculative_config"] == {"method": method, "model": pair["draft"], "num_speculative_tokens": 3}
        assert pair["expected"]["acceptance_per_position"] == zoo.expected_acceptance_per_position(
            method, "perfect", 3, pair=name)
        ids = PROMPTS["prefix_1"]["prompt_token_ids"]
        assert zoo.expected_output(pair["expected"], ids, 48) == PROMPTS["prefix_1"]["expected_output"]
        cfg = json.loads(open(f"{pair['draft']}/config.json").read())
        assert cfg == zoo.draft_config(method, 3, family=family)
    assert 0.5 < pairs["llama_ctx_eagle"]["expected"]["target_top_probability_t1"] < 0.9
    assert zoo.expected_acceptance_per_position("dflash", "perfect", 3) == [1.0, 0.0, 0.0]  # the old pair unchanged
    stamp = (out / "llama_ctx_target" / "model.safetensors").stat().st_mtime_ns
    again = zoo.build_pair("llama_ctx_eagle3", out, num_speculative_tokens=2)  # reused target, new draft manifest
    assert (out / "llama_ctx_target" / "model.safetensors").stat().st_mtime_ns == stamp
    assert again["expected"]["acceptance_per_position"] == [1.0, 1.0]
    assert zoo.main([str(tmp_path), "--which", "deepseek_mla_mtp", "--json"]) == 0
    [built] = json.loads(capsys.readouterr().out)["pairs"]
    assert built["speculative_config"]["method"] == "mtp"
    assert (tmp_path / "deepseek_mla_mtp_head_perfect" / "model.safetensors").resolve().is_file()


# --------------------------------------------- vLLM's own loader and modules, on CPU, in a separate process


def _vllm_forward_decoder(model, ids, pos, attend):
    """A vLLM Llama/Qwen3/DeepSeek target through its own modules; ``attend(layer_attn, x, pos)`` is the attention.
    Returns the final normed hidden states and the aux states (embeddings, then after every layer)."""
    h, residual, aux = model.model.embed_tokens(ids), None, []
    aux.append(h)
    for layer in model.model.layers:
        if residual is None:
            residual, x = h, layer.input_layernorm(h)
        else:
            x, residual = layer.input_layernorm(h, residual)
        x, residual = layer.post_attention_layernorm(attend(layer.self_attn, x, pos), residual)
        h = layer.mlp(x)
        aux.append(h + residual)
    return model.model.norm(h, residual)[0], aux


def _vllm_gqa(attn, x, pos):
    """vLLM's qkv_proj, q/k norm (Qwen3), rotary_emb and o_proj; the causal softmax attention written out."""
    n, hd = x.shape[0], attn.head_dim
    qkv, _ = attn.qkv_proj(x)
    q, k, v = qkv.split([attn.q_size, attn.kv_size, attn.kv_size], -1)
    if hasattr(attn, "q_norm"):
        q = attn.q_norm(q.reshape(n, -1, hd)).reshape(q.shape)
        k = attn.k_norm(k.reshape(n, -1, hd)).reshape(k.shape)
    q, k = attn.rotary_emb.forward_native(pos, q, k)
    o = R.softmax_attention(q.view(n, -1, hd).float(), k.view(n, -1, hd).float(), v.view(n, -1, hd).float(),
                            hd ** -0.5)
    return attn.o_proj(o.to(x.dtype))[0]


def _vllm_mla(attn, x, pos):
    """vLLM's DeepseekV2Attention (VLLM_MLA_DISABLE=1 on CPU: the same weights, expanded) with the attention
    written out, as its forward does up to ``self.attn``."""
    n = x.shape[0]
    nope, rope_dim, vd = attn.qk_nope_head_dim, attn.qk_rope_head_dim, attn.v_head_dim
    q = attn.q_proj(x)[0].view(n, -1, nope + rope_dim)
    latent = attn.kv_a_proj_with_mqa(x)[0]
    kv = attn.kv_b_proj(attn.kv_a_layernorm(latent[:, :attn.kv_lora_rank]))[0].view(n, -1, nope + vd)
    q_pe, k_pe = attn.rotary_emb.forward_native(pos, q[..., nope:].contiguous(),
                                                latent[:, None, attn.kv_lora_rank:].contiguous())
    qq = torch.cat([q[..., :nope], q_pe], -1).float()
    kk = torch.cat([kv[..., :nope], k_pe.expand(n, qq.shape[1], rope_dim)], -1).float()
    o = R.softmax_attention(qq, kk, kv[..., nope:].float(), attn.scaling)
    return attn.o_proj(o.to(x.dtype))[0]


def _vllm_heads(name, tm, dm, seq, hidden, aux):
    """The head's first pass over ``seq`` through vLLM's own modules; returns (drafts per row, expected)."""
    ids, pos = torch.tensor(seq[1:]), torch.arange(len(seq) - 1)
    rule = _rule(seq)
    if name == "llama_ctx_eagle":
        layer = dm.model.layers[0]
        x = dm.model.fc(torch.cat([dm.model.embed_tokens(ids), hidden[:-1]], -1))
        h, residual = layer.post_attention_layernorm(_vllm_gqa(layer.self_attn, x, pos), x)
        logits = dm.compute_logits(layer.mlp(h) + residual)
        return logits.argmax(-1).tolist()[1:], rule[2:]
    if name == "llama_ctx_eagle3":
        layer = dm.model.layers[0]
        state = dm.combine_hidden_states(torch.cat([aux[i] for i in EAGLE3_AUX_LAYERS], -1))[:-1]
        x = torch.cat([layer.input_layernorm(dm.model.embed_input_ids(ids)), layer.hidden_norm(state)], -1)
        h, residual = layer.post_attention_layernorm(_vllm_gqa(layer.self_attn, x, pos), state)
        out, _ = dm.model.norm(layer.mlp(h), residual)
        return dm.compute_logits(out).argmax(-1).tolist()[1:], rule[2:]
    if name == "deepseek_mla_mtp":
        mtp = dm.model.layers[str(dm.model.mtp_start_layer_idx)]
        embeds = torch.where(pos[:, None] == 0, 0, dm.model.embed_tokens(ids))
        x = mtp.eh_proj(torch.cat([mtp.enorm(embeds), mtp.hnorm(hidden[:-1])], -1))
        block = mtp.mtp_block
        h, residual = block.post_attention_layernorm(_vllm_mla(block.self_attn, block.input_layernorm(x), pos), x)
        logits = dm.compute_logits(block.mlp(h) + residual)
        return logits.argmax(-1).tolist()[2:], rule[3:]
    if name == "mimo_ctx_mtp":  # MiMoMultiTokenPredictorLayer: [hidden | embedding], a Qwen2 block, final norm
        mtp = dm.model.mtp_layers[str(dm.model.mtp_start_layer_idx)]
        embeds = torch.where(pos[:, None] == 0, 0, dm.model.embed_tokens(ids))
        x = mtp.input_proj(torch.cat([mtp.hidden_layernorm(hidden[:-1]), mtp.token_layernorm(embeds)], -1))
        block = mtp.mtp_block
        h, residual = block.post_attention_layernorm(_vllm_gqa(block.self_attn, block.input_layernorm(x), pos), x)
        logits = dm.compute_logits(mtp.final_layernorm(block.mlp(h) + residual))
        return logits.argmax(-1).tolist()[2:], rule[3:]
    if name == "llama_ctx_draft_model":  # a whole LLM: its greedy token at every position is the target's
        states, _ = _vllm_forward_decoder(dm, torch.tensor(seq), torch.arange(len(seq)), _vllm_gqa)
        return dm.compute_logits(states).argmax(-1).tolist(), rule
    return _vllm_dflash(dm, seq, aux)


def _vllm_dflash(dm, seq, aux):
    """DFlash query blocks through vLLM's own modules (context K/V as precompute_and_store_context_kv)."""
    layer, model = dm.model.layers[0], dm.model
    attn, hd = layer.self_attn, layer.self_attn.head_dim
    drafts, want = [], []
    for n in (len(seq) - 8, len(seq) - 5):
        ctx = model.hidden_norm(dm.combine_hidden_states(torch.cat([aux[i + 1] for i in DFLASH_TARGET_LAYERS], -1)))
        ctx, ctx_pos = ctx[:n], torch.arange(n)
        ck, cv = torch.nn.functional.linear(ctx, attn.qkv_proj.weight[attn.q_size:]).split(
            [attn.kv_size, attn.kv_size], -1)
        ck = attn.k_norm(ck.reshape(n, -1, hd)).reshape(ck.shape)
        ck, _ = attn.rotary_emb.forward_native(ctx_pos, ck, None)
        ids, q_pos = torch.tensor([seq[n]] + [zoo.MASK_ID] * 3), torch.arange(n, n + 4)
        x = model.embed_input_ids(ids)
        q, k, v = attn.qkv_proj(layer.input_layernorm(x))[0].split([attn.q_size, attn.kv_size, attn.kv_size], -1)
        q = attn.q_norm(q.reshape(4, -1, hd)).reshape(q.shape)
        k = attn.k_norm(k.reshape(4, -1, hd)).reshape(k.shape)
        q, k = attn.rotary_emb.forward_native(q_pos, q, k)
        keys = torch.cat([ck, k]).view(n + 4, -1, hd).float()
        vals = torch.cat([cv, v]).view(n + 4, -1, hd).float()
        o = R.softmax_attention(q.view(4, -1, hd).float(), keys, vals, hd ** -0.5, causal=False).to(x.dtype)
        h, residual = layer.post_attention_layernorm(attn.o_proj(o)[0], x)
        h, _ = model.norm(layer.mlp(h), residual)
        drafts += dm.compute_logits(h[1:]).argmax(-1).tolist()
        want += F.dflash_proposal(FN, seq[:n + 1], 3)
    return drafts, want


def _vllm_cpu_check(zoo_dir: str, names: list[str]) -> dict[str, bool]:
    """Each named context pair through vLLM 0.26.0's real loader (bf16, CPU) and real modules (attention written out:
    vLLM's CPU path has none without metadata). Run in its own process (see the test)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("zoo_tests", Path(__file__).with_name("test_model_zoo.py"))
    zoo_tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zoo_tests)
    engine_config = zoo_tests.vllm_cpu_session()
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import get_model

    results: dict[str, bool] = {}
    seq = _run("short_12", 30)
    ids, pos = torch.tensor(seq), torch.arange(len(seq))
    for name in names:
        pair = zoo.build_pair(name, zoo_dir)
        vc = engine_config(pair)
        with set_current_vllm_config(vc), torch.inference_mode():
            tm = get_model(vllm_config=vc)
            draft_config = vc.speculative_config.draft_model_config
            if pair["method"] == "draft_model":  # a whole LLM, built as DraftModelProposer builds it: its own config
                from vllm.config.utils import replace  # (the model reads vllm_config.model_config) and prefix

                dm = get_model(vllm_config=replace(vc, model_config=draft_config), prefix="draft_model")
            else:
                dm = get_model(vllm_config=vc, model_config=draft_config)
            results[f"{name}: draft class"] = type(dm).__name__ == {
                "eagle": "EagleLlamaForCausalLM", "eagle3": "Eagle3LlamaForCausalLM",
                "dflash": "DFlashQwen3ForCausalLM", "mtp": "MiMoMTP" if name == "mimo_ctx_mtp" else "DeepSeekMTP",
                "draft_model": "LlamaForCausalLM"}[pair["method"]]
            if pair["method"] not in ("mtp", "draft_model") and not dm.has_own_embed_tokens:
                dm.model.embed_tokens = tm.model.embed_tokens  # what the proposer's load_model does
            if pair["method"] != "draft_model":  # a separate draft model keeps its own (DraftModelProposer)
                dm.lm_head = tm.lm_head
            attend = _vllm_mla if name == "deepseek_mla_mtp" else _vllm_gqa
            hidden, aux = _vllm_forward_decoder(tm, ids, pos, attend)
            results[f"{name}: target argmax is the rule"] = tm.compute_logits(hidden).argmax(-1).tolist() == _rule(seq)
            drafts, want = _vllm_heads(name, tm, dm, seq, hidden, aux)
            results[f"{name}: head drafts"] = drafts == want
            if name == "mimo_ctx_mtp":  # built from the target's config: its layer index follows the target's
                layers = sorted(vc.compilation_config.static_forward_context)
                results[f"{name}: draft attention continues the target's layer indices"] = layers == [
                    f"model.layers.{i}.self_attn.attn" for i in range(3)]
    return results


def test_vllm_loads_the_context_pairs_and_its_modules_reproduce_them(ctx):
    """vLLM's loader accepts every context checkpoint and its real modules (bf16, CPU) give the rule and the drafts.
    The MLA pair loads with VLLM_MLA_DISABLE=1 (no MLA backend on CPU: same weights, MHA-expanded attention)."""
    pytest.importorskip("vllm")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "VLLM_PLUGINS": "", "PYTHONUNBUFFERED": "1",
           "VLLM_MLA_DISABLE": "1"}
    proc = subprocess.run([sys.executable, __file__, "--vllm-cpu-check", str(ctx[0]), *zoo.CONTEXT_PAIRS], env=env,
                          capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    results = json.loads(lines[-1])
    assert len(results) == 3 * len(zoo.CONTEXT_PAIRS) + 1 and all(results.values()), results


if __name__ == "__main__":
    if sys.argv[1:2] == ["--vllm-cpu-check"]:
        print(json.dumps(_vllm_cpu_check(sys.argv[2], sys.argv[3:])), flush=True)
