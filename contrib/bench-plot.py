#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Plot hmemloop-bench's CSV: bandwidth against size, log-log, one line per
method, one panel per direction.

    bench-plot.py RESULTS.csv [-o PLOT.png]

Exits 2 when matplotlib is missing or the CSV holds nothing to plot.
"""
import argparse
import csv
import os
import sys

METHODS = [  # CSV name, legend, style
    ("ceiling", "ceiling (CUDA driver copy + sync)", dict(color="black", linestyle="--", marker="")),
    ("fi_write", "fi_write via hmemloop", dict(color="tab:blue", marker="o")),
    ("fi_read", "fi_read via hmemloop", dict(color="tab:green", marker="s")),
    ("fi_send", "fi_send via hmemloop", dict(color="tab:purple", marker="^")),
    ("staging", "staging via pinned host memory", dict(color="tab:red", marker="x")),
]
DIRECTIONS = [("D2D", "device to device"), ("H2D", "host to device"),
              ("D2H", "device to host"),
              ("G0toG1", "GPU 0 to GPU 1"), ("G1toG0", "GPU 1 to GPU 0")]


def size_label(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or n % 1024 or unit == "GiB":
            return "%d %s" % (n, unit)
        n //= 1024
    return str(n)


def load(path):
    """{(direction, method): [(size, bytes per second)]} and the provider."""
    series, provider = {}, ""
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("status") != "ok" or not row.get("bw_Bps"):
                continue
            provider = row.get("provider", provider)
            key = (row["direction"], row["method"])
            series.setdefault(key, []).append((int(row["size"]),
                                               float(row["bw_Bps"])))
    for points in series.values():
        points.sort()
    return series, provider


def plot(series, provider, out, plt):
    # Mode 1's three directions, or --cross's two: those the CSV has.
    dirs = [(d, t) for d, t in DIRECTIONS if any(k[0] == d for k in series)]
    fig, axes = plt.subplots(1, len(dirs), figsize=(16, 5.2), sharey=True,
                             squeeze=False)
    axes = axes[0]
    sizes = sorted({s for pts in series.values() for s, _ in pts})
    for ax, (d, title) in zip(axes, dirs):
        for m, label, style in METHODS:
            pts = series.get((d, m))
            if not pts:
                continue
            ax.plot([s for s, _ in pts], [b / 1e9 for _, b in pts],
                    label=label, linewidth=1.6, markersize=4, **style)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("transfer size (bytes)")
        ax.grid(True, which="major", alpha=0.3)
        ticks = sizes[::2] if len(sizes) > 8 else sizes
        ax.set_xticks(ticks)
        ax.set_xticklabels([size_label(s) for s in ticks], rotation=45,
                           ha="right")
    axes[0].set_ylabel("bandwidth (GB/s, from the median latency)")
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    fig.legend(handles, labels, loc="lower center", ncol=len(labels),
               frameon=False)
    fig.suptitle("hmemloop-bench: same-process copies of CUDA device memory"
                 + (" over %s" % provider if provider else ""))
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    fig.savefig(out, dpi=130)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="CSV written by hmemloop-bench --csv")
    ap.add_argument("-o", "--output",
                    help="PNG to write (default: the CSV's name, .png)")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench-plot.py: matplotlib is not installed (Debian: apt-get "
              "install python3-matplotlib; else pip install matplotlib)",
              file=sys.stderr)
        return 2
    series, provider = load(args.csv)
    if not series:
        print("bench-plot.py: %s has no measured rows" % args.csv,
              file=sys.stderr)
        return 2
    out = args.output or os.path.splitext(args.csv)[0] + ".png"
    plot(series, provider, out, plt)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
