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


# ---- replicated produce (bench.py --replicated) -----------------------------------------------------


def _counts(runs: list[dict[str, Any]], name: str) -> int:
    """The total of a failover run's error counters (a dict of error name -> count)."""
    return sum(sum((r.get(name) or {}).values()) for r in runs)


def replicated_summary(results: dict[str, Any]) -> dict[str, Any]:
    """Per product: medians (min, max) of the throughput, latency and failover figures, and each
    node's CPU share (of one core) under the throughput load."""
    out: dict[str, Any] = {}
    for product, sections in results.items():
        produce = sections.get("produce", [])
        java = sections.get("produce_java", [])
        lat = sections.get("latency", [])
        fail = sections.get("failover", [])

        def cluster_cpu_per_gb(run: dict[str, Any]) -> float | None:
            cpu = [s for s in run.get("node_cpu_s", {}).values() if s is not None]
            moved = run.get("acked", 0) * 1024
            return sum(cpu) / (moved / 1e9) if cpu and moved else None

        nodes = sorted({n for r in produce for n in r.get("node_cpu_share", {})})
        out[product] = {
            "produce_msgs_per_s": stat(produce, field("msgs_per_s")),
            "produce_mb_per_s": stat(produce, field("mb_per_s")),
            "produce_cpu_s_per_gb": stat(produce, cluster_cpu_per_gb),
            "produce_node_cpu_share": {n: stat(produce, field(n, "node_cpu_share")) for n in nodes},
            "java_msgs_per_s": stat(java, field("msgs_per_s")),
            "java_mb_per_s": stat(java, field("mb_per_s")),
            "java_ack_p99": stat(java, field("p99")),
            "achieved_rate": stat(lat, field("achieved_rate", "ack")),
            "acked_in_latency_run": stat(lat, field("count", "ack")),
            "ack_p50": stat(lat, field("p50", "ack")),
            "ack_p99": stat(lat, field("p99", "ack")),
            "e2e_p50": stat(lat, field("p50", "e2e")),
            "e2e_p99": stat(lat, field("p99", "e2e")),
            "latency_cpu_s": stat(
                lat, lambda r: sum(s for s in r.get("node_cpu_s", {}).values() if s is not None) or None
            ),
            "failover_s": stat(fail, field("failover_s")),
            "metadata_leader_s": stat(fail, field("metadata_leader_s")),
            "rejoin_s": stat(fail, field("rejoin_s")),
            "failover_retries": stat(fail, field("request_retries")),
            "failover_delivery_errors": _counts(fail, "delivery_errors"),
            "failover_client_errors": _counts(fail, "client_errors"),
            "failover_rounds": len(fail),
        }
    return out


REPLICATED_ROWS: list[tuple[str, str, str]] = [
    ("produce, librdkafka (2 producers)", "produce_msgs_per_s", "msg/s"),
    ("produce, librdkafka (2 producers)", "produce_mb_per_s", "MB/s"),
    ("produce, kafka-producer-perf-test", "java_mb_per_s", "MB/s"),
    ("producer-perf-test ack p99", "java_ack_p99", "ms"),
    ("cluster CPU per GB produced (all nodes)", "produce_cpu_s_per_gb", "s"),
    ("latency run: sent / seconds until the last ack", "achieved_rate", "msg/s"),
    ("latency run: messages acknowledged (after the warm-up)", "acked_in_latency_run", ""),
    ("produce-to-ack p50 at 10k msg/s", "ack_p50", "ms"),
    ("produce-to-ack p99 at 10k msg/s", "ack_p99", "ms"),
    ("end-to-end p50 at 10k msg/s", "e2e_p50", "ms"),
    ("end-to-end p99 at 10k msg/s", "e2e_p99", "ms"),
    ("failover: kill to first ack of a later write", "failover_s", "s"),
    ("failover: kill to Metadata naming a new leader", "metadata_leader_s", "s"),
    ("failover: producer request retries", "failover_retries", ""),
    ("restarted node back in sync", "rejoin_s", "s"),
]


def _median(summary: dict[str, Any], product: str, key: str) -> float | None:
    s = summary.get(product, {}).get(key)
    return None if s is None else float(s["median"])


def replicated_targets(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets: 1 KiB acks=all RF=3 throughput >= 50% of Apache Kafka's (librdkafka
    and, when measured, producer-perf-test) and produce-to-ack p99 < 20 ms at 10k msg/s; the
    end-to-end p99 and the failover time are reported beside Kafka's, with no bound of their own."""
    out: list[dict[str, Any]] = []
    ref = "apache-kafka"
    for name, key in (
        ("produce 1 KiB acks=all RF=3, librdkafka >= 50% of Apache Kafka", "produce_mb_per_s"),
        ("produce 1 KiB acks=all RF=3, producer-perf-test >= 50% of Apache Kafka", "java_mb_per_s"),
    ):
        mine, theirs = _median(summary, SUBJECT, key), _median(summary, ref, key)
        if mine is None:
            continue
        if theirs is None or theirs == 0:
            out.append({"name": name, "value": f"{mine:.1f} MB/s", "status": "not judged (no Apache Kafka figure)"})
            continue
        ratio = mine / theirs
        out.append(
            {
                "name": name,
                "value": f"{mine:.1f} MB/s ({ratio:.0%})",
                "reference": f"{theirs:.1f} MB/s",
                "status": "met" if ratio >= 0.5 else "UNMET",
            }
        )
    for name, key, unit, limit in (
        ("produce-to-ack p99 < 20 ms at 10k msg/s, RF=3", "ack_p99", "ms", 20.0),
        ("end-to-end p99 at 10k msg/s, RF=3", "e2e_p99", "ms", None),
        ("failover: kill to first ack of a later write", "failover_s", "s", None),
    ):
        mine, theirs = _median(summary, SUBJECT, key), _median(summary, ref, key)
        if mine is None:
            continue
        status = "reported" if limit is None else ("met" if mine < limit else "UNMET")
        out.append(
            {
                "name": name,
                "value": f"{mine:.3g} {unit}",
                "reference": "-" if theirs is None else f"{theirs:.3g} {unit}",
                "status": status,
            }
        )
    return out


def replicated_markdown(summary: dict[str, Any], goals: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    products = list(summary)
    ref = "apache-kafka" if "apache-kafka" in summary else None
    plan = meta.get("plan", {})
    lines = [
        f"# Replicated produce: 3 nodes, RF=3, acks=all ({meta.get('date', '')})",
        "",
        f"- command: `{meta.get('command', '')}`",
        f"- machine: {meta.get('machine', '')}",
        f"- software: {meta.get('software', '')}",
        f"- {meta.get('seconds', 0) / 60:.1f} min; {plan.get('runs', '?')} run(s) of each measurement "
        f"(median, min-max); produce {plan.get('produce_seconds', '?')} s, latency {plan.get('latency_seconds', '?')} s",
        "",
        "Each product's 3-node cluster (every node broker and controller) ran alone, one after the other; "
        "topics of 6 partitions, replication factor 3, min.insync.replicas=2; 1 KiB values. "
        "The nodes, the load generators and the harness share the machine's cores: three Python nodes "
        "(one core each at most) or three JVMs, plus the clients.",
        "",
    ]
    if goals:
        lines += ["## Targets", "", "| target | kafkalike | Apache Kafka | status |", "|---|---|---|---|"]
        lines += [f"| {g['name']} | {g['value']} | {g.get('reference', '-')} | {g['status']} |" for g in goals]
        lines.append("")
    header = "| measurement | " + " | ".join(products) + (" | kafkalike / Kafka |" if ref else " |")
    lines += ["## Figures", "", header, "|---" * (len(products) + 1 + (1 if ref else 0)) + "|"]
    for label, key, unit in REPLICATED_ROWS:
        cells = []
        for product in products:
            s = summary[product].get(key)
            cells.append("-" if s is None else _range(s, unit))
        if all(c == "-" for c in cells):
            continue
        row = f"| {label}{f' ({unit})' if unit else ''} | " + " | ".join(cells)
        if ref:
            mine, theirs = _median(summary, SUBJECT, key), _median(summary, ref, key)
            row += f" | {mine / theirs:.2f}x" if mine is not None and theirs else " | -"
        lines.append(row + " |")
    for product in products:
        s = summary[product]
        lines.append(
            f"| failover: delivery errors / client errors ({product}, {s['failover_rounds']} rounds) | "
            + " | ".join(
                f"{s['failover_delivery_errors']} / {s['failover_client_errors']}" if p == product else ""
                for p in products
            )
            + (" | |" if ref else " |")
        )
    lines += ["", "## Node CPU under the produce load (share of one core, median)", ""]
    lines += ["| product | " + " | ".join(f"node {n}" for n in range(1, 4)) + " |", "|---|---|---|---|"]
    for product in products:
        shares = summary[product].get("produce_node_cpu_share", {})
        cells = [f"{shares[str(n)]['median']:.0%}" if shares.get(str(n)) else "-" for n in range(1, 4)]
        lines.append(f"| {product} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "### How it was measured",
        "",
        "- produce: 2 librdkafka producers (processes of their own, linger.ms=5, acks=all) as fast as they "
        "go; kafka-producer-perf-test with batch.size=65536, linger.ms=5, acks=all, about as many records "
        "as librdkafka acknowledged in the same time",
        "- latency: one paced librdkafka producer at 10,000 msg/s (linger.ms=1, acks=all), "
        "produce-to-ack from its delivery reports; end-to-end by a consumer at the log end "
        "(receive time - send time in the value, CLOCK_MONOTONIC)",
        "- failover: 1,000 msg/s to one partition whose leader is not the active controller; the leader "
        "SIGKILLed; failover = kill to the first acknowledgement of a message sent after the kill "
        "(only a new leader can have acknowledged it); delivery errors = messages the producer gave "
        "up on (message.timeout.ms=60000), client errors = librdkafka error callbacks (connection "
        "failures), retries = librdkafka's request retries (statistics); then the node is started "
        "again and 'back in sync' is until Metadata shows all 6 partitions with 3 in-sync replicas",
        "- node CPU: utime+stime of each node process from /proc over the measurement",
    ]
    failures = meta.get("failures") or []
    if failures:
        lines += ["", "### Failures", "", *[f"- {f}" for f in failures]]
    return "\n".join(lines) + "\n"


def _range(s: dict[str, float], unit: str) -> str:
    def one(v: float) -> str:
        if unit == "msg/s":
            return f"{v:,.0f}"
        if unit == "":
            return f"{v:g}"
        return f"{v:.3g}" if unit in ("ms", "s") else f"{v:.1f}"

    if s["n"] > 1:
        return f"{one(s['median'])} ({one(s['min'])}-{one(s['max'])})"
    return one(s["median"])
