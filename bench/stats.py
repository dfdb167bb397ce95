"""Pure arithmetic of the benchmark: percentiles, medians over repeats, saturation, the summary line."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

SATURATED_BELOW = 0.9  # an arm is past saturation when it completes < 90% of the offered rate...
MAX_ERROR_RATE = 0.01  # ...or more than 1% of its requests fail


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class PointStats:
    """One arm at one offered rate (or sequential: rate 0) in one repeat."""

    offered: float  # requests per second; 0 = sequential, one request at a time
    sent: int
    ok: int
    errors: int
    achieved: float  # successful requests per second over the measured window
    p50_ms: float
    p95_ms: float
    p99_ms: float

    @property
    def error_rate(self) -> float:
        return self.errors / self.sent if self.sent else 0.0

    @property
    def saturated(self) -> bool:
        return self.error_rate > MAX_ERROR_RATE or (self.offered > 0 and self.achieved < SATURATED_BELOW * self.offered)

    def to_dict(self) -> dict:
        return {**asdict(self), "error_rate": self.error_rate, "saturated": self.saturated}


def point_stats(offered: float, latencies_s: list[float], errors: int, window_s: float) -> PointStats:
    ms = [x * 1000 for x in latencies_s]
    sent = len(latencies_s) + errors
    return PointStats(
        offered,
        sent,
        len(ms),
        errors,
        len(ms) / window_s if window_s > 0 else 0.0,
        percentile(ms, 50),
        percentile(ms, 95),
        percentile(ms, 99),
    )


def median_point(repeats: list[PointStats]) -> PointStats:
    """Field by field median over repeats of the same arm and offered rate."""

    def med(name: str) -> float:
        values = [getattr(p, name) for p in repeats if not math.isnan(getattr(p, name))]
        return statistics.median(values) if values else math.nan

    return PointStats(
        repeats[0].offered,
        int(med("sent")),
        int(med("ok")),
        int(med("errors")),
        med("achieved"),
        med("p50_ms"),
        med("p95_ms"),
        med("p99_ms"),
    )


def max_rate(points: list[PointStats]) -> float:
    """Highest achieved rate among points whose error rate stays within MAX_ERROR_RATE."""
    good = [p.achieved for p in points if p.offered > 0 and p.error_rate <= MAX_ERROR_RATE]
    return max(good, default=0.0)


def next_rate(rate: float, factor: float) -> float:
    return round(rate * factor, 1)


SIZING_UTILISATION = 0.7  # size workers so the gateway runs at most 70 % busy at the backend's peak rate


def workers_for(rate: float, cpu_ms: float, utilisation: float = SIZING_UTILISATION) -> int:
    """Workers (= cores) a gateway needs to pass `rate` req/s at `cpu_ms` of CPU per request."""
    return max(1, math.ceil(rate * cpu_ms / 1000 / utilisation - 1e-9))


def summary_line(
    added_tuned_ms: float, added_default_ms: float, ratio_tuned: float, ratio_default: float, w: dict | None = None
) -> str:
    line = (
        f"added p50 {added_tuned_ms:.2f} ms (default {added_default_ms:.2f} ms), "
        f"max rate ratio gateway/direct {ratio_tuned:.3f} (default {ratio_default:.3f})"
    )
    if w:
        line += (
            f"; CPU/request {w['cpu_ms_1w']:.2f} ms 1 worker, {w['cpu_ms_2w']:.2f} ms 2 workers "
            f"({w['cpu_change']:+.0%}), {w['req_per_core_1w']:.0f} req/s per gateway core; "
            f"2 workers x{w['rate_ratio']:.2f} the rate on {w['cores_2w']:.2f} cores "
            f"(x{w['projected_ratio']:.2f} on 2 free cores); "
            f"{w['sizing_rate']:.0f} req/s needs {w['workers_for_rate']} workers"
        )
    return line
