"""The designed draft model of ``llama8b_draft1b`` through vLLM 0.26.0's own loader path and modules, at test scale
(a 2-layer draft of hidden 512 beside the 1024-wide target), on CPU in a separate process:

* vLLM's ``EngineArgs`` make the pair's ``SpeculativeConfig`` (method ``draft_model``), and the draft is loaded as
  ``DraftModelProposer`` loads it (the target's load config, the draft's model and parallel config, prefix
  ``draft_model``) by the designed loader from vLLM's plugin loader: every parameter written through
  ``LlamaForCausalLM.load_weights``, its lm_head its own (untied), the on-device self-check run on vLLM's tensors;
* vLLM's modules (attention written out over a KV list, as in ``test_real_shapes_vllm_cpu``) give ``g(t)`` at every
  position: the prompt, the target's continuation and tokens of D, where the perfect and partial drafts differ;
* each check bites: a draft built with the other variant's map is refused by the loader, and with the self-check
  switched off the forward oracle catches it at the tokens of D.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")

from portable_spec_harness.real_shapes import design as D  # noqa: E402

PAIR = "llama8b_draft1b"
BUGS = ("clean", "swapped_refused", "swapped_unchecked")


def _sibling(name: str):
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _inject(bug: str):
    """``swapped_*``: the draft's lm_head reads out the other variant's map (perfect <-> partial)."""
    from unittest import mock

    patchers = []
    if bug.startswith("swapped"):
        real = D.draft_model_weights
        other = {"perfect": "partial", "partial": "perfect"}
        patchers.append(mock.patch.object(D, "draft_model_weights",
                                          lambda make, cfg, variant: real(make, cfg, other[variant])))
    if bug == "swapped_unchecked":
        patchers.append(mock.patch.object(D, "self_check", lambda *a, **k: {"skipped": True}))
    for p in patchers:
        p.start()
    return patchers


def _check(root: Path, engine_config, forward) -> dict[str, bool]:
    from vllm.config import set_current_vllm_config
    from vllm.config.utils import replace
    from vllm.model_executor.model_loader import get_model

    from portable_spec.errors import PortableSpecError
    from portable_spec_harness.real_shapes import build_pair, load, serve_args
    from portable_spec_harness.vllm_door.designed_loader import _loaded_tensors

    path = build_pair(PAIR, "designed", root, scale="small")
    info = load(path)
    _, target_design = D.read_marker(info["target"])
    t = D.tables(target_design)
    prompt = [target_design.words + 1, 5, 4000, target_design.words - 1, 17, 3]
    misses = torch.nonzero(t.disagree).flatten()
    seq = prompt + D.continuation(target_design, prompt, 24) + misses[:200].tolist() + t.active[:200].tolist()
    ids, pos = torch.tensor(seq), torch.arange(len(seq))
    results: dict[str, bool] = {}
    for variant in D.VARIANTS:
        args = serve_args(path, variant, k=3)
        spec = json.loads(args[args.index("--speculative-config") + 1])
        vc = engine_config({"target": info["target"], "speculative_config": spec})
        vc.load_config.load_format = args[args.index("--load-format") + 1]
        sc = vc.speculative_config
        marker, design = D.read_marker(sc.draft_model_config.model)
        results[f"{variant}: vLLM's method is draft_model"] = sc.method == "draft_model"
        results[f"{variant}: the draft's design is the target's at hidden 512"] = (
            marker["role"] == "draft_model" and design.hidden_size == 512 != target_design.hidden_size
            and D.tables(design).f.equal(t.f) and D.tables(design).disagree.equal(t.disagree))
        draft_vc = replace(vc, quant_config=None, model_config=sc.draft_model_config,
                           parallel_config=replace(sc.draft_parallel_config, rank=vc.parallel_config.rank))
        with set_current_vllm_config(draft_vc), torch.inference_mode():
            try:
                dm = get_model(vllm_config=draft_vc, prefix="draft_model")  # as DraftModelProposer._get_model
            except PortableSpecError as exc:
                results[f"{variant}: loader accepted the draft"] = False
                results[f"{variant}: refusal names the miss"] = "draft_model weights miss their tokens" in str(exc)
                continue
            results[f"{variant}: loader accepted the draft"] = True
            results[f"{variant}: a 2-layer LlamaForCausalLM with its own lm_head"] = (
                type(dm).__name__ == "LlamaForCausalLM" and len(dm.model.layers) == 2
                and dm.lm_head.weight.data_ptr() != dm.model.embed_tokens.weight.data_ptr())
            results[f"{variant}: the loader checks vLLM's own draft tensors"] = sorted(
                _loaded_tensors(dict(dm.named_parameters()), "draft_model", design)) == ["embed_tokens", "lm_head"]
            hidden, _ = forward(dm, ids, pos)
            drafted = dm.compute_logits(hidden).argmax(-1)
            want = D.draft_successor(design, variant)[ids]
            results[f"{variant}: drafts g at {len(seq)} positions"] = bool((drafted == want).all())
    return results


def _run(root: str) -> dict[str, dict[str, bool]]:
    engine_config = _sibling("test_model_zoo").vllm_cpu_session()
    forward = _sibling("test_real_shapes_vllm_cpu").target_forward
    from vllm.plugins import load_general_plugins

    load_general_plugins()  # the designed loader, from the dist-info on PYTHONPATH (VLLM_PLUGINS names it)
    runs = {}
    for bug in BUGS:
        patchers = _inject(bug)
        try:
            runs[bug] = _check(Path(root) / bug, engine_config, forward)
        finally:
            for p in patchers:
                p.stop()
    return runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    pytest.importorskip("vllm")
    return _sibling("test_real_shapes_vllm_cpu").checked_in_subprocess(
        __file__, "--draft-model-cpu-check", tmp_path_factory.mktemp("draft_model_cpu"))


def test_vllms_loader_and_modules_give_the_designed_drafts(runs):
    clean = runs["clean"]
    assert len(clean) == 6 * len(D.VARIANTS) and all(clean.values()), clean
    assert sum(" drafts g at " in k for k in clean) == len(D.VARIANTS)


def test_a_draft_built_for_the_other_variant_is_refused_and_caught_by_the_oracle(runs):
    assert runs["swapped_refused"] == {
        **{f"{v}: vLLM's method is draft_model": True for v in D.VARIANTS},
        **{f"{v}: the draft's design is the target's at hidden 512": True for v in D.VARIANTS},
        **{f"{v}: loader accepted the draft": False for v in D.VARIANTS},
        **{f"{v}: refusal names the miss": True for v in D.VARIANTS}}
    unchecked = runs["swapped_unchecked"]
    failed = sorted(k for k, ok in unchecked.items() if not ok)
    assert [k.split(":")[0] for k in failed] == sorted(D.VARIANTS) and all(" drafts g at " in k for k in failed)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--draft-model-cpu-check"]:
        print(json.dumps(_run(sys.argv[2])), flush=True)
