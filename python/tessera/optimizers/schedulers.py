"""Learning-rate schedules: each returns
``schedule(step)`` accepting an int or an array step."""

import math
from typing import Callable, List

import tessera.core as mx


def exponential_decay(init: float, decay_rate: float) -> Callable:
    """``init * decay_rate ** step``."""

    def schedule(step):
        return init * decay_rate ** step

    return schedule


def step_decay(init: float, decay_rate: float, step_size: int) -> Callable:
    """``init * decay_rate ** (step // step_size)``."""
    if step_size < 1:
        raise ValueError(f"[step_decay] step_size must be at least 1 but is {step_size}")

    def schedule(step):
        return init * (decay_rate ** (step // step_size))

    return schedule


def cosine_decay(init: float, decay_steps: int, end: float = 0.0) -> Callable:
    """``end + 0.5 (1 + cos(pi s / decay_steps)) (init - end)``, ``s = min(step, decay_steps)``."""
    if decay_steps < 1:
        raise ValueError(f"[cosine_decay] decay_steps must be at least 1 but is {decay_steps}")

    def schedule(step):
        s = mx.minimum(step, decay_steps)
        decay = 0.5 * (1.0 + mx.cos((math.pi / decay_steps) * s))
        return end + decay * (init - end)

    return schedule


def join_schedules(schedules: List[Callable], boundaries: List[int]) -> Callable:
    """``schedules[0]`` before ``boundaries[0]``, then ``schedules[i + 1](step -
    boundaries[i])`` once ``step >= boundaries[i]``."""
    if len(schedules) == 0:
        raise ValueError("[join_schedules] must provide at least 1 schedule")
    if len(schedules) != len(boundaries) + 1:
        raise ValueError(f"[join_schedules] received {len(boundaries)} boundaries for "
                         f"{len(schedules)} schedules; expected {len(schedules) - 1}")

    def schedule(step):
        output = schedules[0](step)
        for boundary, sched in zip(boundaries, schedules[1:]):
            output = mx.where(step < boundary, output, sched(step - boundary))
        return output

    return schedule


def linear_schedule(init: float, end: float, steps: int) -> Callable:
    """``init + s (end - init) / steps``, ``s = min(step, steps)``."""
    if steps < 1:
        raise ValueError(f"[linear_schedule] steps must be at least 1 but is {steps}")

    def schedule(step):
        step = mx.minimum(step, steps)
        return step * ((end - init) / steps) + init

    return schedule
