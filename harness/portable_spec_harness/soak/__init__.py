"""The serving soak (issue 22): real ``vllm serve`` processes (our platform and FULL drafter; as references the same
server without speculation and with vLLM's eager drafter) under a seeded, bounded client load that makes every
condition of the issue happen, counts each one (from the engine's ``/metrics`` where vLLM exposes it, else from the
client) and judges the outputs against the references.

Modules, one job each: ``budget`` (the fixed sizes and why), ``http`` (a stdlib asyncio HTTP/1.1 client with SSE),
``workload`` (the seeded request plan), ``loadgen`` (drives a plan against servers, per-request deadlines, aborts),
``metrics`` (vLLM's Prometheus names and the text format), ``servers`` (``vllm serve`` command lines and processes),
``probe`` (a vLLM worker extension the servers load, read through ``/collective_rpc``), ``logscan`` (our log
lines), ``conditions`` (the counts), ``judge`` (the verdicts), ``report`` (JSON and the stdout table), ``driver``
(the run). Entry: ``python -m portable_spec_harness.soak OUTDIR``. This package imports nothing heavy at import time:
vLLM resolves ``probe.SoakWorkerExtension`` by name inside every soak server's worker.
"""
