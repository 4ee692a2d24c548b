"""Draws scripts/scale.sh's JSON lines as a chart: transfers/s and messages/s by worker count,
one PostgreSQL under the same per-node CPU quota as a dashed line.

    python3 scripts/scale_chart.py docs/scaling-curve.jsonl docs/scaling.png   # needs matplotlib
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(source, target):
    lines = [json.loads(l) for l in open(source) if l.strip()]
    plain = next(l for l in lines if l["engine"] == "postgres")
    citus = sorted((l for l in lines if l["engine"] == "citus"), key=lambda l: l["workers"])
    workers = [l["workers"] for l in citus]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, title in (
        (axes[0], "transfers_per_s", "api-transfers (random wallets)"),
        (axes[1], "messages_per_s", "consumer"),
    ):
        ax.plot(workers, [l[key] for l in citus], marker="o", label="Citus")
        ax.axhline(plain[key], linestyle="--", color="grey", label="one PostgreSQL")
        ax.set_xticks(workers)
        ax.set_xlabel("Citus workers (plus the coordinator)")
        ax.set_ylabel(key.replace("_per_s", "/s"))
        ax.set_ylim(bottom=0)
        ax.set_title(title)
        ax.legend()
    quota = plain["node_cpu_quota"]
    shards = citus[0].get("shard_count") or 32
    fig.suptitle(f"Every database node capped at {quota} CPU; {shards} shards")
    fig.tight_layout()
    fig.savefig(target, dpi=100)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
