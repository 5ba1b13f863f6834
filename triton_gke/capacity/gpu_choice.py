"""The capacity contract across GPU types: for a region's target rate, how many nodes of each GPU type and at what
$/hour, and the cheaper type, with the arithmetic shown.

Exact arithmetic (Fraction of the decimals given): nodes = ceil(target x (1 + headroom/100) / (rps per GPU x GPUs per
node)), at least 1; $/hour = nodes x (GPUs per node x $ per GPU-hour + $ per VM-hour). Capacity is taken as linear in
GPUs and nodes, as docs/capacity.md does for one GPU type. Ties go to the option listed first. The inputs (rates and
prices) come from the caller: infra/gpu_choice.py reads them from infra/data/ with their sources.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class GpuOption:
    accelerator: str
    machine_type: str
    gpus_per_node: int
    rps_per_gpu: Fraction  # requests/s one GPU serves at the SLO
    gpu_usd_h: Fraction  # per GPU-hour
    vm_usd_h: Fraction | None  # the node's VM per hour; None: unknown, counted as 0 and said so
    rate_source: str = ""


@dataclass(frozen=True)
class Costed:
    option: GpuOption
    nodes: int
    usd_h: Fraction

    @property
    def usd_per_million(self) -> Fraction:
        """$ per million requests at the rate the nodes serve (not the target): the price of one image."""
        served = self.nodes * self.option.gpus_per_node * self.option.rps_per_gpu
        return self.usd_h / (served * 3600) * 1_000_000


def as_fraction(value: float | str | Fraction) -> Fraction:
    """A decimal as the exact number it shows (0.35 is 35/100, not the nearest binary float)."""
    return value if isinstance(value, Fraction) else Fraction(str(value))


def cost(option: GpuOption, target_rps: Fraction, headroom_percent: int = 0) -> Costed:
    per_node = option.rps_per_gpu * option.gpus_per_node
    if per_node <= 0 or target_rps < 0 or headroom_percent < 0:
        raise ValueError("rates must be positive and the target and headroom not negative")
    nodes = max(1, math.ceil(target_rps * (1 + Fraction(headroom_percent, 100)) / per_node))
    node_h = option.gpus_per_node * option.gpu_usd_h + (option.vm_usd_h or 0)
    return Costed(option, nodes, nodes * node_h)


def choose(options: list[GpuOption], target_rps: Fraction, headroom_percent: int = 0) -> tuple[Costed, list[Costed]]:
    """(the cheapest per hour, every option costed in the given order); ValueError when there is none."""
    if not options:
        raise ValueError("no GPU type to choose from")
    costed = [cost(o, target_rps, headroom_percent) for o in options]
    best = min(costed, key=lambda c: c.usd_h)  # min keeps the first of equal ones
    return best, costed


def _money(value: Fraction, places: int = 4) -> str:
    return f"${float(value):.{places}f}"


def arithmetic(costed: list[Costed], best: Costed, target_rps: Fraction, headroom_percent: int = 0) -> list[str]:
    """One line per option with its arithmetic, then the choice and how much cheaper it is per image."""
    factor = 1 + Fraction(headroom_percent, 100)
    lines = []
    for c in costed:
        o = c.option
        vm = "VM price unknown, counted as $0" if o.vm_usd_h is None else f"{_money(o.vm_usd_h)} {o.machine_type}"
        lines.append(
            f"{o.accelerator} on {o.machine_type}: ceil({float(target_rps):.10g} x {float(factor):.10g} / "
            f"({float(o.rps_per_gpu):.10g} req/s x {o.gpus_per_node} GPU)) = {c.nodes} node(s) x "
            f"({o.gpus_per_node} x {_money(o.gpu_usd_h)} GPU + {vm}) = {_money(c.usd_h, 3)}/h; "
            f"{_money(c.usd_per_million)} per million requests" + (f" [{o.rate_source}]" if o.rate_source else "")
        )
    others = [c for c in costed if c is not best]
    if others:
        dearest = max(others, key=lambda c: c.usd_h)
        saving = 1 - best.usd_h / dearest.usd_h if dearest.usd_h else Fraction(0)
        lines.append(
            f"choice: {best.option.accelerator} ({_money(best.usd_h, 3)}/h against {_money(dearest.usd_h, 3)}/h for "
            f"{dearest.option.accelerator}: {float(saving) * 100:.0f} % cheaper per hour at this target, whole nodes)"
        )
    else:
        lines.append(f"choice: {best.option.accelerator} (the only GPU type offered)")
    return lines
