"""What our config hook keeps for later in ``additional_config["portable_spec"]``, typed; read and written here only.

vLLM keeps one capture-size list and no drafter fields, so the hook stores what the drafter's capture, the worker's
log line and the e2e checks need in the one free-form place vLLM copies to every worker: ``additional_config``. The
stored value stays a plain JSON-safe dict (vLLM copies and hashes the config; ``dataclasses.replace`` shares it);
``PlanState`` is the one typed view of it, and the ``record_*`` / ``store_*`` functions the only writers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from portable_spec.capture_sizes import CapturePlan

ADDITIONAL_CONFIG_KEY = "portable_spec"
_MISSING = object()


@dataclass(frozen=True)
class PlanState:
    user_sizes_recorded: bool
    """Whether the user's sizes were recorded (before vLLM filled its default list; only the first run records)."""
    user_sizes: tuple[int, ...] | None
    """The user's explicit capture sizes, sorted; None: vLLM's default ladder."""
    plan: CapturePlan | None
    """The V1 runner's plan (target and drafter sizes); None: none was made (``plan_error`` says why, if one was
    tried) or the config needed none."""
    plan_error: str | None
    """Why no plan could be made, in vLLM's terms; our drafter then stays on vLLM's path."""
    platform: str | None
    """The port the plan was made for."""
    warnings: tuple[str, ...]
    """Every planning warning said so far (re-runs on replaced configs say no more)."""
    mrv2: dict[str, Any] | None
    """What Model Runner V2 was left (``mrv2_sizes``): its sizes, graphs counted, limit, dropped sizes."""

    def dict_for_report(self) -> dict[str, Any] | None:
        """The plan as stored (JSON), for reports."""
        return None if self.plan is None else self.plan.to_dict()


def read(vllm_config: Any) -> PlanState:
    """The state of this config (empty when the hook never ran: vLLM's built-in platform, or no speculation)."""
    stored = (vllm_config.additional_config or {}).get(ADDITIONAL_CONFIG_KEY) or {}
    user = stored.get("user_sizes", _MISSING)
    plan = stored.get("plan")
    return PlanState(user_sizes_recorded=user is not _MISSING,
                     user_sizes=None if user is _MISSING or user is None else tuple(user),
                     plan=CapturePlan.from_dict(plan) if plan else None, plan_error=stored.get("plan_error"),
                     platform=stored.get("platform"), warnings=tuple(stored.get("warnings", ())),
                     mrv2=stored.get("mrv2"))


def _stored(vllm_config: Any) -> dict[str, Any]:
    if vllm_config.additional_config is None:
        vllm_config.additional_config = {}
    return vllm_config.additional_config.setdefault(ADDITIONAL_CONFIG_KEY, {})


def record_user_sizes(vllm_config: Any, sizes: list[int] | None) -> None:
    """Record the user's sizes (None: vLLM's default ladder), the first time only: later runs see our own list."""
    _stored(vllm_config).setdefault("user_sizes", sorted(set(sizes)) if sizes else None)


def record_target_pieces(vllm_config: Any, pieces: int) -> int:
    """The target model's PIECEWISE pieces per capture size, recorded the first time (the target's own config);
    returns the recorded count, so a re-run on the separate draft model's replaced config counts the target's."""
    return int(_stored(vllm_config).setdefault("target_pieces", int(pieces)))


def add_warnings(vllm_config: Any, new: list[str] | tuple[str, ...]) -> None:
    stored = _stored(vllm_config)
    stored["warnings"] = list(dict.fromkeys([*stored.get("warnings", []), *new]))


def store_plan(vllm_config: Any, plan: CapturePlan, platform: str) -> None:
    """A plan was made: it replaces any earlier reason there was none."""
    stored = _stored(vllm_config)
    stored["plan"], stored["platform"] = plan.to_dict(), platform
    stored.pop("plan_error", None)
    add_warnings(vllm_config, plan.warnings)


def store_plan_error(vllm_config: Any, reason: str) -> bool:
    """No plan could be made, for ``reason``; True when that reason is new (to be said once)."""
    stored = _stored(vllm_config)
    stored.pop("plan", None)
    new = stored.get("plan_error") != reason
    stored["plan_error"] = reason
    return new


def store_mrv2(vllm_config: Any, left: dict[str, Any], new_warnings: list[str]) -> None:
    """What Model Runner V2 was left, and the warnings that came with it (not said before)."""
    _stored(vllm_config)["mrv2"] = left
    add_warnings(vllm_config, new_warnings)
