"""Ad hoc, stdlib only: pool the interleaved MRV2 bench runs of sessions 12 and 14 (H200) per pair and concurrency.

Run from this folder: python3 pool_adhoc.py > pool_adhoc.txt

Per pass i of a run: ratio = (tokens / wall_ours[i]) / (tokens / wall_builtin[i]), as in
portable_spec/harness/e2e/paired.py. The interval is its seeded percentile bootstrap of the median (2000 draws,
random.Random(0)), computed the way paired.py computes it. The ratio of medians is the median tok/s of ours over the
median tok/s of builtin, over every pooled pass. sd is the standard deviation of the per-pass ratios. lag-1 r is the
correlation of each per-pass ratio with the next pass's ratio of the same run. For the walls, each divided by its
run's median wall of the same engine and concurrency: lag-1 wall is the correlation of a pass's wall with the same
engine's next pass (slow drift would make it large), r(o,b) the correlation of ours' pass i with builtin's pass i of
the same round (what pairing can cancel). wall is the median pass wall (both engines). At 0.98 (issue 23's bound):
the verdict and, when undecided, about how many passes would decide it (paired.py's 1/sqrt(passes) estimate).
"""

import json
import math
import random
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
S12 = HERE.parent.parent / "2026-11-27-h200-session12" / "mrv2_bench"
OURS, BUILTIN = "ours_platform_mrv2", "builtin_mrv2"
DRAWS, LEVEL, BOUND = 2000, 0.95, 0.98

RUNS = {
    "llama_eagle K=3": [
        HERE / "interleaved_21_eagle" / "bench-mrv2-llama_eagle-k3" / "bench_e2e.json",
        HERE / "frozen_11" / "bench-mrv2-llama_eagle-k3" / "bench_e2e.json",
        HERE / "pinned_21" / "bench-mrv2-llama_eagle-k3" / "bench_e2e.json",
        HERE / "unpinned_21" / "bench-mrv2-llama_eagle-k3" / "bench_e2e.json",
        HERE / "r31" / "bench-mrv2-llama_eagle-k3" / "bench_e2e.json",
        S12 / "bench-mrv2-llama_eagle-k3" / "bench_e2e.json",
    ],
    "llama_eagle3 K=5": [
        HERE / "interleaved_21_eagle3" / "bench-mrv2-llama_eagle3-k5" / "bench_e2e.json",
        HERE / "frozen_11" / "bench-mrv2-llama_eagle3-k5" / "bench_e2e.json",
        HERE / "r31" / "bench-mrv2-llama_eagle3-k5" / "bench_e2e.json",
        S12 / "bench-mrv2-llama_eagle3-k5" / "bench_e2e.json",
    ],
}


def cells(path):
    """{concurrency: (ours bench row, builtin bench row)} of one run."""
    rows = {r["variant"]: {b["concurrency"]: b for b in r["bench"]} for r in json.loads(path.read_text())["results"]}
    for row in rows.values():
        for b in row.values():
            assert b.get("wall_s_all"), path
    return {c: (rows[OURS][c], rows[BUILTIN][c]) for c in rows[OURS] if c in rows[BUILTIN]}


def interval(values):
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(DRAWS))
    tail = (1 - LEVEL) / 2
    return medians[int(tail * (DRAWS - 1))], medians[int(math.ceil((1 - tail) * (DRAWS - 1)))]


def at_bound(values, low, high):
    if low >= BOUND:
        return "holds"
    if high < BOUND:
        return "fails"
    gap = abs(statistics.median(values) - BOUND)
    return f"undecided (~{max(len(values), math.ceil(len(values) * ((high - low) / 2 / gap) ** 2))} passes)"


def corr(pairs):
    xs, ys = [a for a, _ in pairs], [b for _, b in pairs]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in pairs)
    return sxy / math.sqrt(sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys))


def main():
    print("pooled interleaved MRV2 bench runs, ours_platform_mrv2 vs builtin_mrv2 (H200, sessions 12 and 14)")
    for pair, paths in RUNS.items():
        print()
        print(pair + ": " + ", ".join(str(p.relative_to(HERE.parent.parent)) for p in paths))
        print(f"{'c':>4} {'runs':>4} {'passes':>6} {'paired median':>13} {'95% interval':>16} {'ratio of medians':>16}"
              f" {'sd':>6} {'lag-1 r':>7} {'lag-1 wall':>10} {'r(o,b)':>6}"
              f" {'wall s':>7}  at 0.98")
        per_c = {}
        for path in paths:
            for c, (ours, builtin) in cells(path).items():
                ratios = [(ours["output_tokens"] / wo) / (builtin["output_tokens"] / wb)
                          for wo, wb in zip(ours["wall_s_all"], builtin["wall_s_all"])]
                d = per_c.setdefault(c, {"runs": 0, "ratios": [], "lag": [], "ours": [], "builtin": [], "walls": [], "wall_lag": [], "wall_pair": []})
                d["runs"] += 1
                d["ratios"] += ratios
                d["lag"] += list(zip(ratios, ratios[1:]))
                d["ours"] += [ours["output_tokens"] / w for w in ours["wall_s_all"]]
                d["builtin"] += [builtin["output_tokens"] / w for w in builtin["wall_s_all"]]
                d["walls"] += ours["wall_s_all"] + builtin["wall_s_all"]
                norm_o = [w / statistics.median(ours["wall_s_all"]) for w in ours["wall_s_all"]]
                norm_b = [w / statistics.median(builtin["wall_s_all"]) for w in builtin["wall_s_all"]]
                d["wall_lag"] += list(zip(norm_o, norm_o[1:])) + list(zip(norm_b, norm_b[1:]))
                d["wall_pair"] += list(zip(norm_o, norm_b))
        for c in sorted(per_c):
            d = per_c[c]
            low, high = interval(d["ratios"])
            rom = statistics.median(d["ours"]) / statistics.median(d["builtin"])
            print(f"{c:>4} {d['runs']:>4} {len(d['ratios']):>6} {statistics.median(d['ratios']):>13.3f}"
                  f" {f'[{low:.3f}, {high:.3f}]':>16} {rom:>16.3f} {statistics.stdev(d['ratios']):>6.3f}"
                  f" {corr(d['lag']):>7.2f} {corr(d['wall_lag']):>10.2f} {corr(d['wall_pair']):>6.2f} {statistics.median(d['walls']):>7.3f}  {at_bound(d['ratios'], low, high)}")


if __name__ == "__main__":
    main()
