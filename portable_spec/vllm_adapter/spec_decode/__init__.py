"""The V1 drafter on our FULL graphs (as ``vllm/v1/spec_decode``): the proposers, the fused chain, the runner's draft
prep folded into the first pass, the policy that decides whether any of it applies, and tensor-parallel agreement."""
