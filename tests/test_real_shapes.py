"""Real-shape pairs (harness/portable_spec_harness/real_shapes), no vLLM: the pair list, the folders ``build_pair`` writes,
the tokenizers (exact vocabulary, round trip, what ``vllm bench serve``'s random dataset needs), the designed token
maps and acceptance, the construction's readouts at test scale (and that they catch a wrong construction), the RoPE
profile, the memory plan and the CLI."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")

from portable_spec.errors import PortableSpecError  # noqa: E402
from portable_spec_harness.real_shapes import build as B  # noqa: E402
from portable_spec_harness.real_shapes import design as D  # noqa: E402
from portable_spec_harness.real_shapes import memory, shapes, tokenizer  # noqa: E402
from portable_spec_harness.real_shapes import PAIR_NAMES, build_pair, serve_args  # noqa: E402

SMALL = {name: B.design_of(shapes.pair(name, "small")) for name in PAIR_NAMES}


def test_the_pairs_are_one_list_with_the_public_numbers():
    assert PAIR_NAMES == ("llama8b_eagle", "llama8b_eagle3", "qwen3moe30b_eagle3", "llama8b_draft1b") == tuple(
        shapes.PAIRS)
    llama, qwen = shapes.LLAMA31_8B, shapes.QWEN3_30B_A3B
    assert (llama["hidden_size"], llama["num_hidden_layers"], llama["num_attention_heads"],
            llama["num_key_value_heads"], llama["intermediate_size"], llama["vocab_size"]) == (
        4096, 32, 32, 8, 14336, 128256)
    assert llama["rope_theta"] == 500000.0 and llama["rope_scaling"]["rope_type"] == "llama3"
    assert (qwen["hidden_size"], qwen["num_hidden_layers"], qwen["num_experts"], qwen["num_experts_per_tok"],
            qwen["moe_intermediate_size"], qwen["vocab_size"]) == (2048, 48, 128, 8, 768, 151936)
    for name in PAIR_NAMES:
        p = shapes.pair(name)
        assert p.head["vocab_size"] == p.target["vocab_size"] == p.vocabulary.size
        assert p.head["max_position_embeddings"] == p.target["max_position_embeddings"]
        assert p.active == 32000 and p.head.get("draft_vocab_size", 32000) == 32000
    assert shapes.parameter_count(llama) == 8_030_261_248  # Llama-3.1-8B's published count
    assert 30.4e9 < shapes.parameter_count(qwen) < 30.6e9  # Qwen3-30B-A3B: 30.5B


def test_the_draft_model_pair_is_llama_3_2_1b_beside_llama_3_1_8b():
    p = shapes.pair("llama8b_draft1b")
    d = p.head
    assert p.method == "draft_model" and p.target is shapes.LLAMA31_8B and p.family == "llama"
    assert (d["architectures"], d["hidden_size"], d["num_hidden_layers"], d["num_attention_heads"],
            d["num_key_value_heads"], d["head_dim"], d["intermediate_size"], d["vocab_size"]) == (
        ["LlamaForCausalLM"], 2048, 16, 32, 8, 64, 8192, 128256)
    assert d["rope_theta"] == 500000.0 and d["rope_scaling"] == {
        "rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192}
    assert d["tie_word_embeddings"] is True and d["torch_dtype"] == "bfloat16" and d["rms_norm_eps"] == 1e-5
    assert (d["bos_token_id"], d["eos_token_id"]) == (shapes.LLAMA31_8B["bos_token_id"],
                                                      shapes.LLAMA31_8B["eos_token_id"])
    assert shapes.parameter_count(d) == 1_235_814_400  # Llama-3.2-1B's published count (tied embeddings)
    plan = memory.plan(p)  # a whole model: all its weights, KV in each of its 16 layers
    assert plan["head_params"] == 1_235_814_400 and plan["kind"] == "nvidia-h100-x1"
    assert plan["kv_bytes_per_token"] == (32 + 16) * 2 * 8 * 128 * 2 - 16 * 2 * 8 * 64 * 2
    small = shapes.pair("llama8b_draft1b", "small").head
    assert small["num_hidden_layers"] == 2 and small["hidden_size"] != shapes.SMALL_TARGET["hidden_size"]
    assert small["vocab_size"] == shapes.SMALL_TARGET["vocab_size"] and small["rope_scaling"]["factor"] == 32.0


def test_build_pair_writes_the_draft_model_and_its_speculative_config(tmp_path):
    path = build_pair("llama8b_draft1b", "dummy", tmp_path / "pair")
    info = B.load(path)
    assert info["drafts"] == {"dummy": str(path / "draft")}
    assert json.loads((path / "draft" / "config.json").read_text()) == shapes.LLAMA32_1B
    args = serve_args(path, k=5)
    assert args[:3] == [str(path / "target"), "--load-format", "dummy"]
    assert json.loads(args[args.index("--speculative-config") + 1]) == {
        "method": "draft_model", "model": str(path / "draft"), "num_speculative_tokens": 5}


def test_the_designed_draft_model_is_the_targets_design_at_its_own_hidden_size(tmp_path):
    p = shapes.pair("llama8b_draft1b")
    path = build_pair("llama8b_draft1b", "designed", tmp_path / "pair")
    info = B.load(path)
    assert sorted(info["drafts"]) == sorted(D.VARIANTS) and info["method"] == "draft_model"
    _, target = D.read_marker(info["target"])
    for variant, draft in info["drafts"].items():
        marker, design = D.read_marker(draft)
        assert (marker["role"], marker["variant"], marker["family"]) == ("draft_model", variant, "llama")
        assert design == dataclasses.replace(target, hidden_size=2048) and design.problem() is None
        assert json.loads((Path(draft) / "config.json").read_text()) == {**shapes.LLAMA32_1B,
                                                                          "tie_word_embeddings": False}
        spec = json.loads(serve_args(path, variant)[-1])
        assert spec == {"method": "draft_model", "model": draft, "num_speculative_tokens": 3}
    assert list(info["deviations"]) == ["draft.tie_word_embeddings"] and "262,668,288" in info["deviations"][
        "draft.tie_word_embeddings"]
    assert info["shapes"]["head"] == shapes.LLAMA32_1B  # the public shape; the deviation is named beside it
    assert info["expected_acceptance"]["partial"]["per_position_k3"] == D.expected_acceptance("partial", 3)
    assert B.load(build_pair("llama8b_draft1b", "dummy", tmp_path / "d"))["deviations"] == {}
    assert json.loads((tmp_path / "d" / "draft" / "config.json").read_text())["tie_word_embeddings"] is True
    with pytest.raises(PortableSpecError, match="set tie_word_embeddings false") as err:
        next(iter(D.weights("draft_model", p.head, design, "llama", "perfect", "cpu", torch.bfloat16)))
    assert "\n" not in str(err.value)


def test_the_draft_models_readout_is_g_on_every_token_and_catches_swapped_tables():
    """Small scale (hidden 512: the construction reads the draft's own width): the perfect draft reads out f, the
    partial one f(f(t)) on D, on every token with margin; a draft built for the other variant misses exactly D, and
    the loader's self-check refuses it in one line."""
    p = shapes.pair("llama8b_draft1b", "small")
    d = B.draft_design(p, SMALL["llama8b_draft1b"])
    assert d.hidden_size == 512 and D.tables(d).f.equal(D.tables(SMALL["llama8b_draft1b"]).f)
    make = D.Maker(d, "cpu", torch.bfloat16)
    cfg = B.draft_config(p, "designed")
    heads = {}
    for variant in D.VARIANTS:
        g = D.draft_successor(d, variant)
        named = dict(D.weights("draft_model", cfg, d, "llama", variant, "cpu", torch.bfloat16))
        assert named["model.embed_tokens.weight"].shape == (d.vocab_size, 512)
        assert len([n for n in named if n.endswith("mlp.down_proj.weight")]) == 2
        heads[variant] = named["lm_head.weight"]
        emb = named["model.embed_tokens.weight"].float()
        assert torch.equal((emb @ heads[variant].float().t()).argmax(-1), g)  # every token, all rows competing
        report = D.self_check("draft_model", cfg, d, variant, "cpu", torch.bfloat16, 512,
                              loaded={"embed_tokens": named["model.embed_tokens.weight"], "lm_head": heads[variant]})
        assert report["tokens"] == d.vocab_size and report["wrong"] == 0 and report["min_margin"] >= D.MIN_MARGIN
    misses = int(D.tables(d).disagree.sum())
    assert misses == round(0.4 * d.active)
    for built, checked in (("perfect", "partial"), ("partial", "perfect")):
        swapped = D.target_readout(make, heads[built], D.draft_successor(d, checked))
        assert swapped["wrong"] == misses, swapped
        with pytest.raises(PortableSpecError, match="designed draft_model weights miss their tokens") as err:
            D.self_check("draft_model", cfg, d, checked, "cpu", torch.bfloat16, 512, loaded={"lm_head": heads[built]})
        assert "\n" not in str(err.value)


def test_simulated_acceptance_of_the_draft_model_is_its_designs():
    """The draft model drafts g(input token), the chain ``simulate`` runs: with the draft's own design (the same
    tables) the simulation is the target design's, 1.0 for perfect and about agreement ** (i + 1) for partial."""
    p = shapes.pair("llama8b_draft1b", "small")
    target = SMALL["llama8b_draft1b"]
    draft = B.draft_design(p, target)
    prompt = [target.words + 3, 17, 5]
    for variant in D.VARIANTS:
        sim = D.simulate(draft, variant, prompt, 2000, 3)
        assert sim == D.simulate(target, variant, prompt, 2000, 3)
        for rate, want in zip(sim["acceptance_per_position"], D.expected_acceptance(variant, 3)):
            assert abs(rate - want) < 0.06, sim["acceptance_per_position"]


def test_unknown_names_are_one_line_errors():
    for call, text in ((lambda: shapes.pair("nope"), "use one of llama8b_eagle"),
                       (lambda: shapes.pair("llama8b_eagle", "huge"), "use one of real, small"),
                       (lambda: build_pair("llama8b_eagle", "random", "/tmp/x"), "use one of dummy, designed"),
                       (lambda: D.draft_successor(SMALL["llama8b_eagle"], "half"), "use one of perfect, partial")):
        with pytest.raises(PortableSpecError, match=text) as err:
            call()
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("mode", B.MODES)
def test_build_pair_writes_the_folder_pair_json_and_serve_args(tmp_path, mode):
    path = build_pair("llama8b_eagle3", mode, tmp_path / "pair")
    info = B.load(path)
    assert path == tmp_path / "pair" and info["pair"] == "llama8b_eagle3" and info["mode"] == mode
    target = Path(info["target"])
    assert json.loads((target / "config.json").read_text()) == shapes.LLAMA31_8B
    assert {p.name for p in target.iterdir()} >= {"config.json", "generation_config.json", "tokenizer.json",
                                                  "tokenizer_config.json", "special_tokens_map.json"}
    assert (target / D.MARKER).exists() == (mode == "designed")
    assert sorted(info["drafts"]) == (sorted(D.VARIANTS) if mode == "designed" else ["dummy"])
    for variant, draft in info["drafts"].items():
        assert json.loads((Path(draft) / "config.json").read_text())["draft_vocab_size"] == 32000
        args = serve_args(path, variant, k=4)
        spec = json.loads(args[args.index("--speculative-config") + 1])
        assert args[0] == info["target"] and spec == {"method": "eagle3", "model": draft, "num_speculative_tokens": 4}
        assert args[args.index("--load-format") + 1] == ("dummy" if mode == "dummy" else "portable_spec_designed")
        if mode == "designed":
            marker, design = D.read_marker(draft)
            assert marker["role"] == "eagle3" and marker["variant"] == variant and design == B.design_of(
                shapes.pair("llama8b_eagle3"))
    with pytest.raises(PortableSpecError, match="has no 'half' head"):
        serve_args(path, "half")
    assert not list(tmp_path.glob("*.tmp-*"))  # written aside, then renamed


def test_a_folder_without_its_marker_is_refused_in_one_line(tmp_path):
    with pytest.raises(PortableSpecError, match="build the folder with") as err:
        D.read_marker(tmp_path)
    (tmp_path / D.MARKER).write_text(json.dumps({"format": "other", "version": 1, "role": "target",
                                                 "design": {"vocab_size": 8, "hidden_size": 4, "words": 8,
                                                            "active": 4}}))
    with pytest.raises(PortableSpecError, match="not a version-1 designed-weights marker"):
        D.read_marker(tmp_path)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["llama8b_eagle3", "qwen3moe30b_eagle3"])
def test_the_tokenizer_has_exactly_the_vocabulary_and_round_trips(tmp_path, name):
    transformers = pytest.importorskip("transformers")
    p = shapes.pair(name)
    tokenizer.write(tmp_path, p.vocabulary, 2048)
    tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert len(tok) == tok.vocab_size == p.target["vocab_size"]
    assert tok.eos_token_id == p.vocabulary.eos[0] and tok.bos_token_id == p.vocabulary.bos
    assert tok.num_special_tokens_to_add() == (1 if p.vocabulary.bos is not None else 0)
    rng = torch.Generator().manual_seed(0)
    ids = torch.randint(0, p.target["vocab_size"], (4000,), generator=rng).tolist() + [0, p.vocabulary.words - 1,
                                                                                        p.vocabulary.words,
                                                                                        p.target["vocab_size"] - 1]
    assert tok.encode(tok.decode(ids), add_special_tokens=False) == ids
    words = [tokenizer.word(i) for i in range(p.vocabulary.words)]
    assert len(set(words)) == len(words) and tokenizer.word(25) == "z" and tokenizer.word(26) == "aa"
    for token, text in p.vocabulary.named:
        assert tok.convert_ids_to_tokens(token) == text


def test_the_token_maps_walk_one_cycle_through_c_with_balanced_preimages():
    d = SMALL["qwen3moe30b_eagle3"]
    t = D.tables(d)
    active = set(t.active.tolist())
    assert len(active) == d.active and max(active) < d.words  # C holds ordinary words only
    assert set(t.f.tolist()) == active  # every token maps into C
    x, seen = int(t.cycle[0]), []
    for _ in range(d.active):
        seen.append(x)
        x = int(t.f[x])
    assert x == int(t.cycle[0]) and set(seen) == active  # one cycle through all of C
    counts = torch.bincount(t.f, minlength=d.vocab_size)[t.active]
    assert int(counts.max()) - int(counts.min()) <= 1
    assert int(t.disagree.sum()) == round(0.4 * d.active) and set(torch.nonzero(t.disagree).flatten().tolist()) <= active
    g = D.draft_successor(d, "partial")
    assert torch.equal(g != t.f, t.disagree) and torch.equal(D.draft_successor(d, "perfect"), t.f)
    assert D.tables(B.design_of(shapes.pair("qwen3moe30b_eagle3", "small"), seed=1)).f.tolist() != t.f.tolist()


def test_simulated_acceptance_is_one_for_the_perfect_head_and_about_sixty_percent_for_the_partial():
    d = SMALL["llama8b_eagle3"]
    prompt = [d.words + 3, 17, 5]  # a special token too: f maps it into C
    perfect = D.simulate(d, "perfect", prompt, 600, 3)
    assert perfect["output"] == D.continuation(d, prompt, 600) and perfect["acceptance_per_position"] == [1.0] * 3
    assert perfect["num_drafts"] > 100
    partial = D.simulate(d, "partial", prompt, 3000, 3)
    assert partial["output"] == D.continuation(d, prompt, 3000)  # greedy output never depends on the head
    rates = partial["acceptance_per_position"]
    for i, want in enumerate(D.expected_acceptance("partial", 3)):
        assert abs(rates[i] - want) < 0.06, rates
    assert 2.0 < partial["mean_acceptance_length"] < 2.4


@pytest.mark.parametrize("name", ["llama8b_eagle3", "qwen3moe30b_eagle3"])
def test_the_readouts_give_the_designed_tokens_with_margin_at_test_scale(name):
    p, d = shapes.pair(name, "small"), SMALL[name]
    make = D.Maker(d, "cpu", torch.bfloat16)
    target = D.target_readout(make)
    assert target["tokens"] == d.vocab_size and target["wrong"] == 0 and target["min_margin"] >= D.MIN_MARGIN
    for variant in D.VARIANTS:
        head = D.eagle3_readout(make, p.head, variant)
        assert head["tokens"] == d.active and head["wrong"] == 0 and head["min_margin"] >= D.MIN_MARGIN, head
    emb = make.embeddings()
    assert set(emb.unique().tolist()) == {-1.0, 1.0} and bool((emb[:, 0] == 1).all())


def test_the_readouts_catch_a_wrong_construction():
    """Injected bugs: an lm_head built for f(f(t)), an EAGLE-3 lm_head whose rows are one draft id off, and
    embeddings too short for the vocabulary's near-orthogonality (hidden 64): each check fails, and self_check
    refuses in one line."""
    p, d = shapes.pair("llama8b_eagle3", "small"), SMALL["llama8b_eagle3"]
    make = D.Maker(d, "cpu", torch.bfloat16)
    f = D.tables(d).f
    wrong_map = make.zeros(d.vocab_size, d.hidden_size).index_add_(0, f[f], make.embeddings()) * (16 / d.hidden_size)
    assert D.target_readout(make, wrong_map)["wrong"] > d.vocab_size // 2
    shifted = torch.roll(D.eagle3_lm_head(make, p.head, "perfect"), 1, 0)
    assert D.eagle3_readout(make, p.head, "perfect", shifted)["wrong"] == d.active
    narrow = D.Design(d.vocab_size, 64, d.words, d.active, logit=4.0)
    report = D.target_readout(D.Maker(narrow, "cpu", torch.bfloat16))
    assert report["wrong"] > 0 or report["min_margin"] < D.MIN_MARGIN
    with pytest.raises(PortableSpecError, match="miss their tokens") as err:
        D.self_check("target", p.target, narrow, None, "cpu", torch.bfloat16, 512)
    assert "\n" not in str(err.value)


def test_the_eagle3_profile_peaks_at_the_own_position_and_its_pairs_escape_llama3_scaling():
    for name in ("llama8b_eagle3", "qwen3moe30b_eagle3"):
        head = shapes.pair(name).head
        rope = D.rope_gap(head, head["max_position_embeddings"])
        assert rope["gap"] >= 40 and rope["pairs_used"] == 25 <= rope["pairs_unscaled"], rope
    scaled = {**shapes.EAGLE3_LLAMA31_8B, "rope_scaling": {**shapes.LLAMA31_8B["rope_scaling"],
                                                           "original_max_position_embeddings": 1024}}
    assert D.unscaled_pairs(scaled) < 25  # a profile on scaled pairs would not peak where we think
    with pytest.raises(PortableSpecError, match="position-only attention does not hold"):
        D.self_check("eagle3", {**scaled, **shapes.SMALL_HEAD, "draft_vocab_size": 2048},
                     SMALL["llama8b_eagle3"], "perfect", "cpu", torch.bfloat16, 512)


def test_the_eagle3_geometry_is_exact_in_bf16_for_both_heads():
    for name in ("llama8b_eagle3", "qwen3moe30b_eagle3"):
        for scale in shapes.SCALES:
            geo = D.Eagle3Geometry.of(shapes.pair(name, scale).head)
            assert geo.problem() is None and geo.rms == 0.5
    assert D.Eagle3Geometry(32, 8, 128, 3072).problem()


def test_the_memory_plan_puts_both_targets_on_one_h100():
    llama, qwen = memory.plan(shapes.pair("llama8b_eagle3")), memory.plan(shapes.pair("qwen3moe30b_eagle3"))
    assert 15.5 < llama["weights_gib"] < 16.0 and llama["kind"] == "nvidia-h100-x1"
    assert 56.5 < qwen["weights_gib"] < 57.5 and qwen["kv_bytes_per_token"] == 48 * 2 * 4 * 128 * 2 + 2 * 4 * 128 * 2
    assert qwen["kind"] == "nvidia-h100-x1" and qwen["cards"]["nvidia-h100-x1"]["kv_tokens"] > 1.5 * memory.BENCH_TOKENS
    assert qwen["cards"]["nvidia-h200"]["kv_gib"] > 5 * qwen["cards"]["nvidia-h100-x1"]["kv_gib"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "portable_spec_harness.real_shapes", *args], capture_output=True,
                          text=True, timeout=120)


def test_cli_builds_lists_and_fails_in_one_line(tmp_path):
    ok = _cli("build", "--pair", "qwen3moe30b_eagle3", "--mode", "designed", "--out", str(tmp_path / "q"), "--json")
    assert ok.returncode == 0, ok.stderr
    out = json.loads(ok.stdout)
    assert out["pair"] == "qwen3moe30b_eagle3" and sorted(out["serve_args"]) == ["partial", "perfect"]
    assert out["memory"]["kind"] == "nvidia-h100-x1" and Path(out["target"], "tokenizer.json").is_file()
    listed = json.loads(_cli("list", "--json").stdout)
    assert list(listed["pairs"]) == list(PAIR_NAMES)
    env = json.loads(_cli("plugin-env", "--json").stdout)
    assert env["PYTHONPATH"].split(":")[0].endswith("portable_spec_designed_weights_plugin")
    for args in (("build", "--pair", "nope", "--mode", "dummy", "--out", str(tmp_path / "x")),
                 ("build", "--pair", "llama8b_eagle", "--mode", "dummy"), ("bogus",)):
        bad = _cli(*args)
        assert bad.returncode == 2 and bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    bad = _cli("build", "--pair", "nope", "--mode", "dummy", "--out", str(tmp_path / "x"), "--json")
    assert bad.returncode == 2 and json.loads(bad.stdout) == {
        "error": "real_shapes: unknown pair 'nope'; use one of llama8b_eagle, llama8b_eagle3, qwen3moe30b_eagle3, "
                 "llama8b_draft1b",
        "exit": 2}
