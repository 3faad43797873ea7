#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Plot hmemloop-bench's CSV: bandwidth against size, log-log, one line per
method, one panel per direction. Where the CSV has the message rates of
the HMEMLOOP_ASYNC=0 and =1 workers (and --mixed's), a second plot: the
message rate against size, each hmemloop method under both settings,
beside the ceiling and staging.

    bench-plot.py RESULTS.csv [-o PLOT.png] [--rate-output RATE.png]

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


# The message-rate plot: (CSV method, column, legend, style); the
# ceiling's line is the faster of its two variants at each size.
RATE_LINES = [
    ("ceiling", "rate_ops_per_s", "ceiling (N copies + one sync)",
     dict(color="black", linestyle="--", marker="")),
    ("staging", "rate_ops_per_s", "staging",
     dict(color="tab:red", marker="x")),
]
for _m, _color, _marker in (("fi_write", "tab:blue", "o"),
                            ("fi_read", "tab:green", "s"),
                            ("fi_send", "tab:purple", "^"),
                            ("mixed_fi_write", "tab:orange", "D")):
    RATE_LINES += [
        (_m, "rate_sync_ops_per_s", "%s, HMEMLOOP_ASYNC=0" % _m,
         dict(color=_color, marker=_marker, linestyle=":", fillstyle="none")),
        (_m, "rate_async_ops_per_s", "%s, HMEMLOOP_ASYNC=1" % _m,
         dict(color=_color, marker=_marker)),
    ]


def load(path):
    """{(direction, method): [(size, bytes per second)]}, the provider, and
    {(direction, method, column): {size: operations per second}}."""
    series, provider, rates = {}, "", {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("status") != "ok":
                continue
            provider = row.get("provider", provider)
            size = int(row["size"])
            method = row["method"]
            if method.startswith("ceiling_"):
                method = "ceiling"      # the faster variant, below
            for col in ("rate_ops_per_s", "rate_sync_ops_per_s",
                        "rate_async_ops_per_s"):
                if row.get(col):
                    pts = rates.setdefault((row["direction"], method, col), {})
                    pts[size] = max(pts.get(size, 0), float(row[col]))
            if not row.get("bw_Bps") or method != row["method"]:
                continue
            key = (row["direction"], row["method"])
            series.setdefault(key, []).append((size, float(row["bw_Bps"])))
    for points in series.values():
        points.sort()
    return series, provider, rates


def size_axis(ax, sizes):
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("transfer size (bytes)")
    ax.grid(True, which="major", alpha=0.3)
    ticks = sizes[::2] if len(sizes) > 8 else sizes
    ax.set_xticks(ticks)
    ax.set_xticklabels([size_label(s) for s in ticks], rotation=45,
                       ha="right")


def legend(fig, axes, ncol):
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    fig.legend(handles, labels, loc="lower center", ncol=ncol,
               frameon=False)


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
        size_axis(ax, sizes)
        ax.set_title(title)
    axes[0].set_ylabel("bandwidth (GB/s, from the median latency)")
    legend(fig, axes, len(METHODS))
    fig.suptitle("hmemloop-bench: same-process copies of CUDA device memory"
                 + (" over %s" % provider if provider else ""))
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    fig.savefig(out, dpi=130)


def plot_rates(rates, provider, out, plt):
    """Message rate against size: a panel per direction, and --mixed's."""
    panels = [(d, t) for d, t in DIRECTIONS
              if any(k[0] == d and k[2] != "rate_ops_per_s" for k in rates)]
    mixed = any(k[1] == "mixed_fi_write" for k in rates)
    if mixed:
        panels.append(("mixed", "--mixed: fi_write D2D, 4 threads x 16"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.4 * len(panels), 5.6),
                             sharey=True, squeeze=False)
    axes = axes[0]
    sizes = sorted({s for pts in rates.values() for s in pts})
    for ax, (d, title) in zip(axes, panels):
        for m, col, label, style in RATE_LINES:
            if (d == "mixed") != (m == "mixed_fi_write") and m not in (
                    "ceiling", "staging"):
                continue
            pts = rates.get(("D2D" if d == "mixed" else d, m, col))
            if not pts:
                continue
            xs = sorted(pts)
            ax.plot(xs, [pts[x] / 1e3 for x in xs], label=label,
                    linewidth=1.4, markersize=4, **style)
        size_axis(ax, sizes)
        ax.set_title(title)
    axes[0].set_ylabel("message rate (thousand operations/s)")
    legend(fig, axes, 4)
    fig.suptitle("hmemloop-bench: message rate, HMEMLOOP_ASYNC=0 (dotted) "
                 "and =1 (solid)"
                 + (" over %s" % provider if provider else ""))
    fig.tight_layout(rect=(0, 0.16, 1, 0.95))
    fig.savefig(out, dpi=130)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="CSV written by hmemloop-bench --csv")
    ap.add_argument("-o", "--output",
                    help="PNG to write (default: the CSV's name, .png)")
    ap.add_argument("--rate-output",
                    help="the message-rate PNG, where the CSV has the "
                    "HMEMLOOP_ASYNC columns (default: the CSV's name, "
                    "-rate.png)")
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
    series, provider, rates = load(args.csv)
    if not series:
        print("bench-plot.py: %s has no measured rows" % args.csv,
              file=sys.stderr)
        return 2
    out = args.output or os.path.splitext(args.csv)[0] + ".png"
    plot(series, provider, out, plt)
    print(out)
    if any(k[2] != "rate_ops_per_s" for k in rates):
        out = (args.rate_output or
               os.path.splitext(args.csv)[0] + "-rate.png")
        plot_rates(rates, provider, out, plt)
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
