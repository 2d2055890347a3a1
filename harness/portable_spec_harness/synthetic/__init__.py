"""Synthetic EAGLE/DFlash draft steps (test doubles of the runner's ``DraftStepSource`` protocol), their fused ops
(Triton + torch references), static buffers, and the proposer that drives them through the one runner."""
