"""Device counts that do not poison ``fork``.

``torch.cuda.is_available()`` calls ``cudaGetDeviceCount`` and marks the process so that a forked child cannot use
CUDA ("Cannot re-initialize CUDA in forked subprocess"). vLLM forks its engine core after resolving the platform,
so anything our platform probe asks must go through NVML (CUDA) or AMD SMI (ROCm), as vLLM's own probes do; only
where those libraries are absent do we fall back to torch's runtime query.
"""

from __future__ import annotations


def visible_device_count() -> int:
    """Visible GPUs of this torch build (CUDA or HIP), without initialising the runtime when avoidable."""
    import torch

    query = "_device_count_amdsmi" if getattr(torch.version, "hip", None) else "_device_count_nvml"
    counter = getattr(torch.cuda, query, None)
    if counter is not None:
        try:
            count = int(counter())
        except Exception:
            count = -1
        if count >= 0:
            return count
    return torch.cuda.device_count() if torch.cuda.is_available() else 0
