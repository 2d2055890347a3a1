"""Real-shape pairs without downloads (issues 24, 39): Llama-3.1-8B with an EAGLE-1 head, an EAGLE-3 head or a
Llama-3.2-1B-shaped draft model, and a Qwen3-30B-A3B-shaped MoE target with an EAGLE-3 head, built from public
numbers, served by ``vllm serve`` unchanged.

One job per module:

* ``shapes``: the public numbers (configs we write ourselves) and ``PAIRS``, the one list of pair names; ``SMALL``
  test scale;
* ``tokenizer``: a WordLevel tokenizer with exactly each model's vocabulary;
* ``design``: the designed weights (known greedy tokens, a perfect and a ~60% head or draft model), made on the
  device, and the checks the loader runs on them;
* ``build``: ``build_pair(name, mode, out_dir) -> Path`` writes a pair's folder; ``serve_args`` / ``load`` read it;
* ``memory``: the one-GPU memory plan (which kind a pair needs);
* ``plugin``: puts the designed-weights loader (``harness/portable_spec_harness/vllm_door/designed_loader.py``) on vLLM's plugin
  path for a run;
* ``smoke``: the GPU smoke (``python -m portable_spec_harness.real_shapes.smoke OUT``, cuda lane stage
  ``real-shapes``): ``vllm serve`` of a designed pair, outputs and acceptance against the design;
* ``python -m portable_spec_harness.real_shapes``: the CLI (``build``, ``list``, ``plugin-env``; ``--json``).

Two weight modes: ``dummy`` (``--load-format dummy``, vLLM's random weights: acceptance ~0) and ``designed``
(``--load-format portable_spec_designed``: the harness's loader writes the weights on the device).
"""

from portable_spec_harness.real_shapes.build import MODES, build_pair, load, serve_args
from portable_spec_harness.real_shapes.design import VARIANTS
from portable_spec_harness.real_shapes.shapes import PAIR_NAMES

__all__ = ["MODES", "PAIR_NAMES", "VARIANTS", "build_pair", "load", "serve_args"]
