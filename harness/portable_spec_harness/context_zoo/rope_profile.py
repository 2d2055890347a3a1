"""Position-only attention heads: RoPE query/key patterns whose score peaks at one relative position, with a gap.

A head whose query and key do not depend on the token (``q = q_pat * (c . x)``, ``k = k_pat * (c . x)``, ``c . x``
the same for every token) scores key position ``n`` from query position ``m`` by RoPE alone. With ``k = (kappa_i, 0)``
and ``q = kappa_i (cos(psi_i - d0 theta_i), sin(psi_i - d0 theta_i))`` in rotary pair ``i`` (RoPE multiplies pair
``i`` by ``exp(1j * position * theta_i)``)::

    score(m - n) = scale * sum_i kappa_i^2 cos((m - n - d0) theta_i + psi_i)

The amplitudes put half the weight on pair 0 (``theta = 1`` rad: ``1 - cos 1 = 0.46`` separates neighbours) and
spread the other half evenly over the next pairs (together they keep every far position from lining up with the
peak). The phase ``psi_0 = 0.15`` (0 elsewhere) tilts the peak so that one position nearer scores clearly above one
position farther: when a bug removes the peak's key (a query position off by one), the head reads a determined key
instead of a 50/50 mix of two. :func:`gap` computes, in float64, the smallest ``score(d0) - score(d)`` over ``d - d0``
in ``[-12, 4200)`` minus 0 (every key of a 2048-token context and keys up to 12 positions in the future, visible only
under a bug), and :func:`tilt` ``score(d0 - 1) - score(d0 + 1)``:

==========  =====================================================  ======  =====  =====
profile     pattern                                                peak    gap    tilt
==========  =====================================================  ======  =====  =====
``llama``   64 neox pairs, theta 1e4, kappa 30 / 6 on pairs 1-24,  155.0   30.7   20.0
            scale 1 / sqrt(128) (Llama, EAGLE heads)
``qnorm``   the same pattern RMS-normed per head to 4 (Qwen3,      180.0   35.7   23.2
            DFlash: q_norm / k_norm weight 4)
``mla``     32 interleaved pairs, theta 1e4, kappa 32 / 8 on        147.0   27.2   18.6
            pairs 1-16, scale 1 / sqrt(192) (DeepSeek MLA q_pe/k_pe)
==========  =====================================================  ======  =====  =====

So the softmax puts at most ``4200 * exp(-27.2) < 1e-8`` of its weight off the peak, and bf16 (q, k and cos/sin
rounded to 8 bits: a score error below 1% of the peak, < 2) cannot move it. The tests assert these numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GAP_RANGE = (-12, 4200)


@dataclass(frozen=True)
class Profile:
    pairs: int  # rotary pairs (head dim of the rotary part / 2)
    interleaved: bool  # DeepSeek: pair i = dims (2i, 2i + 1); neox: (i, i + pairs)
    theta: float
    kappa_first: float  # pair 0
    kappa_rest: float
    rest: int  # pairs 1..rest carry kappa_rest
    scale: float  # softmax scale
    norm: float | None = None  # q/k RMS-normed per head, times this weight (Qwen3 q_norm / k_norm)
    phase: float = 0.15  # psi of pair 0

    def phases(self) -> list[float]:
        return [self.phase] + [0.0] * (self.pairs - 1)

    def kappas(self) -> list[float]:
        return [self.kappa_first] + [self.kappa_rest] * self.rest + [0.0] * (self.pairs - 1 - self.rest)

    def angles(self) -> list[float]:
        return [self.theta ** (-i / self.pairs) for i in range(self.pairs)]

    def dims(self, i: int) -> tuple[int, int]:
        return (2 * i, 2 * i + 1) if self.interleaved else (i, i + self.pairs)

    def factor(self) -> float:
        """scale, times the RMS norm's rescaling: |q|^2 = |k|^2 = 2 * pairs * norm^2 after a q/k norm."""
        if self.norm is None:
            return self.scale
        return self.scale * 2 * self.pairs * self.norm ** 2 / sum(k * k for k in self.kappas())

    def score(self, rel: int, d0: int) -> float:
        """The exact (float64) score of a key ``rel = m - n`` positions back from a query peaked at ``d0``."""
        terms = zip(self.kappas(), self.angles(), self.phases())
        return self.factor() * sum(k * k * math.cos((rel - d0) * a + psi) for k, a, psi in terms)

    def peak(self) -> float:
        return self.score(0, 0)


LLAMA = Profile(pairs=64, interleaved=False, theta=10000.0, kappa_first=30.0, kappa_rest=6.0, rest=24,
                scale=128 ** -0.5)
QNORM = Profile(pairs=64, interleaved=False, theta=10000.0, kappa_first=30.0, kappa_rest=6.0, rest=24,
                scale=128 ** -0.5, norm=4.0)
MLA = Profile(pairs=32, interleaved=True, theta=10000.0, kappa_first=32.0, kappa_rest=8.0, rest=16,
              scale=192 ** -0.5)


def gap(profile: Profile, lo: int = GAP_RANGE[0], hi: int = GAP_RANGE[1]) -> float:
    """min over d in [lo, hi), d != 0 of score(peak) - score(peak + d) (RoPE scores are relative: any d0)."""
    import torch

    k2 = torch.tensor([k * k for k in profile.kappas()], dtype=torch.float64)
    ang = torch.tensor(profile.angles(), dtype=torch.float64)
    psi = torch.tensor(profile.phases(), dtype=torch.float64)
    d = torch.tensor([x for x in range(lo, hi) if x], dtype=torch.float64)
    drop = (k2 * (torch.cos(psi) - torch.cos(d[:, None] * ang + psi))).sum(1) * profile.factor()
    return drop.min().item()


def tilt(profile: Profile) -> float:
    """score(one position nearer than the peak) - score(one farther): > 0, so a lost peak reads the nearer key."""
    return profile.score(-1, 0) - profile.score(1, 0)


def patterns(profile: Profile, d0: int):
    """(q, k), each of length 2 * pairs: the position-only query peaked at relative position ``d0`` and the key."""
    import torch

    q = torch.zeros(2 * profile.pairs)
    k = torch.zeros(2 * profile.pairs)
    for i, (kappa, a, psi) in enumerate(zip(profile.kappas(), profile.angles(), profile.phases())):
        x, y = profile.dims(i)
        k[x] = kappa
        q[x] = kappa * math.cos(psi - d0 * a)
        q[y] = kappa * math.sin(psi - d0 * a)
    return q, k
