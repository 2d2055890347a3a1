"""Issue 6's end-to-end matrix on the GPU host, in parts that each fit one 10-minute device call.

    python ci/gpu/v1_drafter_matrix.py OUTDIR --parts perfect,partial    (default: all parts, in order)

Each part runs ci/gpu/v1_drafter_e2e.py with one configuration and writes its JSON into OUTDIR; the exit code is
non-zero if any part failed its checks.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

E2E = str(Path(__file__).with_name("v1_drafter_e2e.py"))
PARTS: dict[str, list[str]] = {
    # 100%-acceptance EAGLE pair: every position must stay at 100% under FULL graphs.
    "perfect": ["--pair", "llama_eagle", "--variant", "perfect"],
    # Needs the draft's attention to read the current position's K/V: catches stale metadata or slots.
    "attention": ["--pair", "llama_eagle", "--variant", "attention", "--variants", "nospec,eager_drafter,full_drafter"],
    "partial": ["--pair", "llama_eagle", "--variant", "partial", "--seeds", "0,1,2", "--tolerance-pts", "1",
                "--variants", "nospec,eager_drafter,full_drafter"],
    "eagle3": ["--pair", "llama_eagle3", "--variant", "perfect", "--variants", "nospec,eager_drafter,full_drafter"],
    # MoE target: vLLM picks the V1 runner by itself.
    "moe": ["--pair", "mixtral_eagle", "--variant", "perfect", "--runner", "auto",
            "--variants", "nospec,eager_drafter,full_drafter"],
    "dflash": ["--pair", "qwen3_dflash", "--variant", "perfect", "--variants", "nospec,eager_drafter,full_drafter"],
    "probabilistic": ["--pair", "llama_eagle", "--variant", "partial", "--seeds", "0,1,2", "--temperature", "1.0",
                      "--draft-sample-method", "probabilistic", "--tolerance-pts", "2",
                      "--variants", "eager_drafter,full_drafter"],
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("outdir")
    parser.add_argument("--parts", default=",".join(PARTS))
    args = parser.parse_args()
    failed = []
    for part in args.parts.split(","):
        print(f"=== v1 drafter matrix: {part} ===", flush=True)
        rc = subprocess.call([sys.executable, E2E, args.outdir, *PARTS[part]])
        if rc:
            failed.append(part)
    print(f"=== failed parts: {failed or 'none'} ===", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
