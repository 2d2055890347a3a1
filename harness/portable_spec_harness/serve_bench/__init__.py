"""The serving benchmark (issue 24): ``vllm serve`` per variant (upstream V1, ours, Model Runner V2), driven by vLLM's
own client ``vllm bench serve``, rounds interleaved, medians and ratios, and the phase clock's host/device split at
concurrency 1 read from inside the served engine (``probe.py``). Entry point: ``python -m
portable_spec_harness.serve_bench``; modules: ``pairs`` (what runs), ``plan`` (variants, order), ``memory``
(placement), ``servers``, ``client``, ``probe``, ``stats``, ``report``, ``driver``, ``combine``, ``coverage`` (which
cells of a serving table the committed pooled summaries measured, and their verdicts)."""
