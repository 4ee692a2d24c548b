"""Draws docs/performance.png from a `wallet-ledger bench` results file.

Usage: python3 scripts/bench_chart.py bench/results.jsonl docs/performance.png

Each throughput scenario is drawn as its ratio to the `ceiling` measured in the same run (the
issue's targets are such ratios, because this machine's absolute speed varies by 2x between
minutes), with the target as a tick. Needs matplotlib (`pip install matplotlib`).
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# scenario -> target ratio to the ceiling (issue 8)
TARGETS = {
    "api-transfers": 0.30,
    "api-hot": 0.20,
    "api-topups": 0.20,
    "api-batch": 0.50,
    "consumer": 0.40,
}


def latest_run(lines):
    """The last line of each scenario, and the ceiling of that run."""
    latest = {}
    for line in lines:
        line = line.strip()
        if line:
            row = json.loads(line)
            latest[row["scenario"]] = row
    return latest


def main(results, out):
    with open(results) as f:
        latest = latest_run(f)
    ceiling = latest["ceiling"]["per_second"]
    names = [n for n in TARGETS if n in latest]
    ratios = [latest[n]["per_second"] / ceiling for n in names]
    fig, ax = plt.subplots(figsize=(8, 4))
    bars = ax.bar(names, ratios, color="#4c72b0", label="measured")
    for bar, name in zip(bars, names):
        per_second = latest[name]["per_second"]
        ax.annotate(
            f"{per_second:,.0f}/s",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.scatter(names, [TARGETS[n] for n in names], marker="_", s=900, color="#c44e52",
               label="target", zorder=3)
    ax.set_ylabel("throughput / ceiling (same run)")
    ax.set_title(f"wallet-ledger bench, ceiling {ceiling:,.0f} transfers/s "
                 f"({latest['ceiling']['at'][:16]}Z, git {latest['ceiling'].get('git')})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
