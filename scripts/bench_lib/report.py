"""Medians and spreads of the recorded runs, the Markdown report, the targets and the plots."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

Getter = Callable[[dict[str, Any]], float | None]
SUBJECT = "kafkalike"


def stat(runs: list[dict[str, Any]], get: Getter) -> dict[str, float] | None:
    values = [v for v in (get(r) for r in runs) if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def field(name: str, *path: str) -> Getter:
    def get(run: dict[str, Any]) -> float | None:
        node: Any = run
        for part in (*path, name):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return float(node) if node is not None else None

    return get


def cpu_per_gb(run: dict[str, Any]) -> float | None:
    cpu, moved = run.get("broker_cpu_s"), run.get("bytes")
    if cpu is None or not moved:
        return None
    return float(cpu) / (moved / 1e9)


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """Per broker, section and key: the median/min/max of the headline numbers."""
    out: dict[str, Any] = {}
    for broker, sections in results.items():
        for section, entries in sections.items():
            for key, entry in entries.items():
                runs = entry["runs"]
                if section == "latency":
                    numbers = {
                        f"{side}_{q}": stat(runs, field(q, side))
                        for side in ("ack", "e2e")
                        for q in ("p50", "p99", "p99.9")
                    }
                    numbers["achieved_rate"] = stat(runs, field("achieved_rate", "ack"))
                elif section == "retained":
                    numbers = {
                        f"{side}_{q}": stat(runs, field(q, side))
                        for side in ("append", "fetch")
                        for q in ("p50", "p99")
                    }
                elif section == "startup":
                    numbers = {
                        "seconds": stat(runs, field("seconds")),
                        "idle_rss_mib": stat(runs, lambda r: (r["idle_rss"] or 0) / 2**20 or None),
                    }
                else:
                    numbers = {
                        "msgs_per_s": stat(runs, field("msgs_per_s")),
                        "mb_per_s": stat(runs, field("mb_per_s")),
                        "cpu_s_per_gb": stat(runs, cpu_per_gb),
                    }
                    if section == "produce_java":
                        numbers["ack_p99"] = stat(runs, field("p99"))
                out.setdefault(broker, {}).setdefault(section, {})[key] = numbers
    return out


# ---- Markdown ---------------------------------------------------------------------------------------


def _num(value: float, unit: str) -> str:
    if unit == "msg/s":
        return f"{value:,.0f}"
    if unit in ("ms", "s"):
        return f"{value:.3f}" if value < 1 else f"{value:.2f}" if value < 100 else f"{value:,.0f}"
    return f"{value:,.1f}"


def _cell(s: dict[str, float] | None, unit: str) -> str:
    if s is None:
        return "n/a"
    if s["n"] > 1 and s["min"] != s["max"]:
        return f"{_num(s['median'], unit)} ({_num(s['min'], unit)}-{_num(s['max'], unit)})"
    return _num(s["median"], unit)


def _ratio(a: dict[str, float] | None, b: dict[str, float] | None) -> str:
    if a is None or b is None or not b["median"]:
        return "n/a"
    return f"{a['median'] / b['median']:.2f}"


def _table(
    title: str,
    summary: dict[str, Any],
    ref: str | None,
    section: str,
    metrics: list[tuple[str, str, str]],
    note: str = "",
) -> list[str]:
    """One row per key of ``section``; per metric a kafkalike column, a reference column and their ratio."""
    keys = list(summary.get(SUBJECT, {}).get(section, {}))
    for k in summary.get(ref, {}).get(section, {}) if ref else []:
        if k not in keys:
            keys.append(k)
    if not keys:
        return []
    head = ["scenario"]
    for label, _, unit in metrics:
        head.append(f"{label} ({unit}) kafkalike")
        if ref:
            head += [f"{label} {ref}", "ratio"]
    lines = [f"### {title}", ""]
    if note:
        lines += [note, ""]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in keys:
        mine = summary.get(SUBJECT, {}).get(section, {}).get(key, {})
        theirs = summary.get(ref, {}).get(section, {}).get(key, {}) if ref else {}
        row = [key]
        for _, name, unit in metrics:
            row.append(_cell(mine.get(name), unit))
            if ref:
                row += [_cell(theirs.get(name), unit), _ratio(mine.get(name), theirs.get(name))]
        lines.append("| " + " | ".join(row) + " |")
    return [*lines, ""]


def markdown(summary: dict[str, Any], meta: dict[str, Any], ref: str | None, targets: list[dict[str, Any]]) -> str:
    lines = [
        "# kafkalike benchmark",
        "",
        f"- command: `{meta['command']}`",
        f"- date: {meta['date']}; took {meta['seconds'] / 60:.1f} min",
        f"- machine: {meta['machine']}",
        f"- software: {meta['software']}",
        f"- brokers: {', '.join(meta['brokers'])}; every cell is the median of the runs with (min-max);"
        " ratio = kafkalike / reference (higher is better for throughput, lower for latency and cost)",
        "",
    ]
    if targets:
        lines += ["## Targets", "", "| target | kafkalike | reference | status |", "|---|---|---|---|"]
        for t in targets:
            lines.append(f"| {t['name']} | {t['value']} | {t.get('reference', '-')} | {t['status']} |")
        lines.append("")
    tput = [("throughput", "msgs_per_s", "msg/s"), ("throughput", "mb_per_s", "MB/s")]
    cost = [("broker CPU", "cpu_s_per_gb", "s/GB")]
    lines += _table("Produce, librdkafka (confluent-kafka, one producer process)", summary, ref, "produce", tput + cost)
    lines += _table(
        "Produce, kafka-producer-perf-test", summary, ref, "produce_java", [*tput, ("ack p99", "ack_p99", "ms")]
    )
    lines += _table("Consume", summary, ref, "consume", tput + cost)
    lat = [
        ("ack p50", "ack_p50", "ms"),
        ("ack p99", "ack_p99", "ms"),
        ("ack p99.9", "ack_p99.9", "ms"),
        ("e2e p50", "e2e_p50", "ms"),
        ("e2e p99", "e2e_p99", "ms"),
        ("e2e p99.9", "e2e_p99.9", "ms"),
    ]
    lines += _table("Latency at fixed rates (msg/s)", summary, ref, "latency", lat)
    lines += _table("Produce throughput vs partitions (1 KiB, acks=1)", summary, ref, "scale_partitions", tput)
    lines += _table(
        "Produce throughput vs producer connections (1 KiB, acks=1, 6 partitions)",
        summary,
        ref,
        "scale_connections",
        tput,
    )
    lines += _table(
        "Append and fetch round trips, empty log vs retained data (one partition)",
        summary,
        ref,
        "retained",
        [
            ("append p50", "append_p50", "ms"),
            ("append p99", "append_p99", "ms"),
            ("fetch p50", "fetch_p50", "ms"),
            ("fetch p99", "fetch_p99", "ms"),
        ],
    )
    lines += _table(
        "Start-up (exec to first Metadata answer) and idle memory",
        summary,
        ref,
        "startup",
        [("start-up", "seconds", "s"), ("idle RSS", "idle_rss_mib", "MiB")],
    )
    rss = meta.get("rss_under_load_mib", {})
    if rss:
        lines += ["### Memory under load", "", "| broker | max RSS during the load scenarios (MiB) |", "|---|---|"]
        lines += [f"| {b} | {v:,.0f} |" for b, v in rss.items()]
        lines.append("")
    if meta.get("notes"):
        lines += ["### Notes", "", *[f"- {n}" for n in meta["notes"]], ""]
    return "\n".join(lines)


# ---- targets ----------------------------------------------------------------------------------------


def _get(summary: dict[str, Any], broker: str | None, section: str, key: str, name: str) -> float | None:
    if broker is None:
        return None
    s = summary.get(broker, {}).get(section, {}).get(key, {}).get(name)
    return None if s is None else float(s["median"])


def targets(summary: dict[str, Any], ref: str | None, plan: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def ratio_target(name: str, section: str, key: str, metric: str, unit: str) -> None:
        mine, theirs = _get(summary, SUBJECT, section, key, metric), _get(summary, ref, section, key, metric)
        if mine is None:
            return
        if theirs is None:
            out.append({"name": name, "value": f"{mine:,.1f} {unit}", "status": "not judged (no reference run)"})
            return
        r = mine / theirs
        out.append(
            {
                "name": name,
                "value": f"{mine:,.1f} {unit} ({r:.0%})",
                "reference": f"{theirs:,.1f} {unit}",
                "status": "met" if r >= 0.5 else "UNMET",
            }
        )

    def bound_target(name: str, section: str, key: str, metric: str, limit: float, unit: str) -> None:
        mine = _get(summary, SUBJECT, section, key, metric)
        if mine is None:
            return
        theirs = _get(summary, ref, section, key, metric)
        out.append(
            {
                "name": name,
                "value": f"{mine:.3g} {unit}",
                "reference": "-" if theirs is None else f"{theirs:.3g} {unit}",
                "status": "met" if mine < limit else "UNMET",
            }
        )

    for parts in (6, 1):
        ratio_target(
            f"produce 1 KiB acks=all, {parts} partition(s), librdkafka >= 50% of reference",
            "produce",
            f"1024B acks=all p={parts} none",
            "mb_per_s",
            "MB/s",
        )
        ratio_target(
            f"produce 1 KiB acks=all, {parts} partition(s), producer-perf-test >= 50% of reference",
            "produce_java",
            f"1024B acks=all p={parts} none",
            "mb_per_s",
            "MB/s",
        )
    for client in ("librdkafka", "raw fetch", "consumer-perf-test"):
        name = f"consume 1 KiB warm, {client} >= 50% of reference"
        ratio_target(name, "consume", f"warm 1024B {client}", "mb_per_s", "MB/s")
    for client in ("librdkafka", "raw fetch"):
        name = f"consume 1 KiB cold, {client} >= 50% of reference"
        ratio_target(name, "consume", f"cold 1024B {client}", "mb_per_s", "MB/s")
    bound_target("produce-to-ack p99 < 10 ms at 10k msg/s", "latency", "10000", "ack_p99", 10, "ms")
    bound_target("end-to-end p99 < 20 ms at 10k msg/s", "latency", "10000", "e2e_p99", 20, "ms")
    bound_target("start-up < 0.5 s", "startup", "fresh", "seconds", 0.5, "s")
    bound_target("idle RSS < 80 MB", "startup", "fresh", "idle_rss_mib", 80 * 1e6 / 2**20, "MiB")
    return out


# ---- plots ------------------------------------------------------------------------------------------


def plots(results: dict[str, Any], summary: dict[str, Any], out_dir: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made: list[Path] = []
    brokers = list(summary)
    colors = {"kafkalike": "#1f77b4", "apache-kafka": "#d62728", "external": "#2ca02c", "kafkalike-baseline": "#7f7f7f"}

    def bars(section: str, metric: str, title: str, ylabel: str, name: str) -> None:
        keys: list[str] = []
        for b in brokers:
            for k in summary[b].get(section, {}):
                if k not in keys:
                    keys.append(k)
        if not keys:
            return
        fig, ax = plt.subplots(figsize=(max(8, len(keys) * 0.7), 5))
        width = 0.8 / max(len(brokers), 1)
        for i, b in enumerate(brokers):
            xs, ys, lo, hi = [], [], [], []
            for j, k in enumerate(keys):
                s = summary[b].get(section, {}).get(k, {}).get(metric)
                if s is None:
                    continue
                xs.append(j + i * width)
                ys.append(s["median"])
                lo.append(s["median"] - s["min"])
                hi.append(s["max"] - s["median"])
            ax.bar(xs, ys, width, yerr=[lo, hi], label=b, color=colors.get(b), capsize=2)
        ax.set_xticks([j + width * (len(brokers) - 1) / 2 for j in range(len(keys))])
        ax.set_xticklabels(keys, rotation=60, ha="right", fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        path = out_dir / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)

    bars("produce", "mb_per_s", "Produce throughput (librdkafka), median, min-max", "MB/s", "produce_throughput.png")
    bars(
        "produce_java",
        "mb_per_s",
        "Produce throughput (kafka-producer-perf-test)",
        "MB/s",
        "produce_java_throughput.png",
    )
    bars("consume", "mb_per_s", "Consume throughput", "MB/s", "consume_throughput.png")

    # Latency CDFs: one panel for produce-to-ack, one for end-to-end; a line per broker and rate.
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    drew = False
    styles = ["-", "--", ":", "-."]
    for side, ax in zip(("ack", "e2e"), axes, strict=True):
        for b in brokers:
            for n, (rate, entry) in enumerate(results.get(b, {}).get("latency", {}).items()):
                cdf = entry["runs"][len(entry["runs"]) // 2][side].get("cdf")
                if not cdf:
                    continue
                ys = [i / (len(cdf) - 1) for i in range(len(cdf))] if len(cdf) > 1 else [1.0]
                ax.plot(cdf, ys, styles[n % len(styles)], color=colors.get(b), label=f"{b} {int(rate):,}/s")
                drew = True
        ax.set_xscale("log")
        ax.set_xlabel("ms")
        ax.set_ylabel("fraction of messages")
        ax.set_title("produce-to-ack latency" if side == "ack" else "end-to-end latency")
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    if drew:
        fig.tight_layout()
        path = out_dir / "latency_cdf.png"
        fig.savefig(path, dpi=110)
        made.append(path)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    drew = False
    for section, ax, label in (
        ("scale_partitions", axes[0], "partitions"),
        ("scale_connections", axes[1], "producer connections"),
    ):
        for b in brokers:
            entries = summary[b].get(section, {})
            if not entries:
                continue
            xs = sorted(entries, key=int)
            ax.plot(
                [int(x) for x in xs], [entries[x]["mb_per_s"]["median"] for x in xs], "o-", color=colors.get(b), label=b
            )
            drew = True
        ax.set_xscale("log", base=2)
        ax.set_xlabel(label)
        ax.set_ylabel("MB/s (1 KiB, acks=1)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    if drew:
        fig.tight_layout()
        path = out_dir / "scaling.png"
        fig.savefig(path, dpi=110)
        made.append(path)
    plt.close(fig)
    return made
