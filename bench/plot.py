"""bench.json -> one PNG: latency and achieved rate vs offered load, per scenario, for every arm."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

COLORS = {"direct": "tab:gray", "default": "tab:red", "generated": "tab:green"}


def plot(report: dict, path: Path) -> None:
    # the scenarios with a sweep of offered load (chat's); the other APIs have the table's figures only
    scenarios = {k: v for k, v in report["scenarios"].items() if any(r["sweep"] for r in v.values())}
    fig, axes = plt.subplots(2, len(scenarios), figsize=(5 * len(scenarios), 8), squeeze=False)
    for col, (name, per_arm) in enumerate(scenarios.items()):
        lat, rate = axes[0][col], axes[1][col]
        for arm, r in per_arm.items():
            if not r["sweep"]:
                continue  # capacity-only arm (generated-2w)
            xs = [p["offered"] for p in r["sweep"]]
            lat.plot(xs, [p["p50_ms"] for p in r["sweep"]], "o-", color=COLORS.get(arm), label=f"{arm} p50")
            lat.plot(xs, [p["p99_ms"] for p in r["sweep"]], "--", color=COLORS.get(arm), alpha=0.6, label=f"{arm} p99")
            rate.plot(xs, [p["achieved"] for p in r["sweep"]], "o-", color=COLORS.get(arm), label=arm)
        top = max((p["offered"] for r in per_arm.values() for p in r["sweep"]), default=1)
        rate.plot([0, top], [0, top], ":", color="black", alpha=0.4, label="offered")
        for ax in (lat, rate):
            ax.set_xscale("log")
            ax.set_xlabel("offered load (req/s)")
            ax.grid(True, which="both", alpha=0.3)
        lat.set_yscale("log")
        lat.set_ylabel("latency (ms)" + (", first chunk" if name == "stream" else ""))
        lat.set_title(f"{name}")
        rate.set_ylabel("achieved (req/s)")
        rate.set_yscale("log")
        if col == 0:
            lat.legend(fontsize=7)
            rate.legend(fontsize=7)
    m = report.get("machine", {})
    # the summary line names every API: wrapped to the figure's width (about 13 characters of 9-point text an inch)
    lines = [*textwrap.wrap(report["summary"], width=13 * 5 * len(scenarios), break_on_hyphens=False)]
    lines.append(f"{m.get('cpu', '')}, {m.get('cpus', '?')} CPUs, LiteLLM {m.get('litellm', '?')}")
    fig.suptitle("\n".join(lines), fontsize=9)
    fig.tight_layout()  # (it leaves the title's lines their room)
    fig.savefig(path, dpi=110)
    plt.close(fig)
