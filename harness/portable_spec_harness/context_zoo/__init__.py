"""The zoo's pairs that see context: targets whose next token depends on the previous two tokens through RoPE
attention, heads that are right only with correct hidden states, positions, KV slots and attention, and two targets
with an MTP layer (MLA and GQA). Registered in ``portable_spec_harness.model_zoo`` (``llama_ctx_eagle``,
``llama_ctx_eagle3``, ``qwen3_ctx_dflash``, ``deepseek_mla_mtp``, ``llama_ctx_draft_model``, ``mimo_ctx_mtp``); one
job per module:

* ``function``: the greedy rule and its tables, ground truth for any prompt, draft proposals, prompts;
* ``basis``: the exactly orthogonal +-1 directions every weight is built from;
* ``rope_profile``: position-only attention patterns and their proven gaps;
* ``attention``: builders for the Llama-style attention weights;
* ``models``: the Llama / Qwen3 targets and the EAGLE-1, EAGLE-3 and DFlash heads;
* ``mla``: the DeepSeek-V3-shaped MLA target and its MTP layer;
* ``mimo``: the MiMo-shaped (Qwen2, q/k/v bias, GQA) target and its MTP layer;
* ``build``: manifests and what ``build_pair`` writes;
* ``reference``: plain-torch mirrors of vLLM's head forwards (and MLA), with bug injection, for the tests.
"""
