"""The gateway benchmark's table: run.sh's raw figures (TSV) as Markdown.

python3 benches/gateway/table.py RESULTS.tsv [MORE.tsv ...]

With several files (several runs), each figure is the median over the runs.
"""

import csv
import statistics
import sys
from collections import defaultdict

NUMERIC = ["rps", "p50_us", "p99_us", "ttfb_p50_us", "ttfb_p99_us", "errors", "non2xx", "peak_rss_mib", "ttfb_samples", "cpu_us_per_request"]


def read(paths):
    runs = defaultdict(list)
    order = []
    for path in paths:
        with open(path) as f:
            for row in csv.DictReader(f, delimiter="\t"):
                key = (row["target"], row["mode"], int(row["concurrency"]))
                if key not in runs:
                    order.append(key)
                runs[key].append(row)
    cells = {}
    for key in order:
        cell = {}
        for field in NUMERIC:
            values = [float(r[field]) for r in runs[key] if r.get(field) not in (None, "-", "")]
            cell[field] = statistics.median(values) if values else None
        cell["runs"] = len(runs[key])
        cells[key] = cell
    return order, cells


def us(value):
    if value is None:
        return "–"
    if abs(value) >= 10_000:
        return f"{value / 1000:.0f} ms"
    if abs(value) >= 1000:
        return f"{value / 1000:.1f} ms"
    return f"{value:.0f} µs"


def added(value, floor):
    if value is None or floor is None:
        return "–"
    return ("+" if value >= floor else "−") + us(abs(value - floor))


def main(paths):
    order, cells = read(paths)
    runs = max(c["runs"] for c in cells.values())
    print(f"Medians over {runs} run(s). Added latency: over the mock alone, same mode and concurrency.\n")
    print("| target | mode | conc. | req/s | CPU/req | ÷ nginx's | p50 | p99 | added p50 | added p99 | TTFB p50 | TTFB p99 | TTFB n | errors | peak RSS |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for key in order:
        target, mode, conc = key
        cell = cells[key]
        floor = cells.get(("mock", mode, conc))
        is_mock = target == "mock"
        errors = int((cell["errors"] or 0) + (cell["non2xx"] or 0))
        nginx = cells.get(("nginx", mode, conc))
        cpu = cell["cpu_us_per_request"]
        to_nginx = "–"
        if cpu is not None and nginx and nginx["cpu_us_per_request"]:
            to_nginx = f"{cpu / nginx['cpu_us_per_request']:.2f}×"
        print(
            f"| {target} | {mode} | {conc} | {cell['rps']:.0f} | {us(cpu)} | {to_nginx} | "
            f"{us(cell['p50_us'])} | {us(cell['p99_us'])} | "
            f"{'–' if is_mock or not floor else added(cell['p50_us'], floor['p50_us'])} | "
            f"{'–' if is_mock or not floor else added(cell['p99_us'], floor['p99_us'])} | "
            f"{us(cell['ttfb_p50_us']) if mode == 'stream' else '–'} | "
            f"{us(cell['ttfb_p99_us']) if mode == 'stream' else '–'} | "
            f"{int(cell['ttfb_samples']) if mode == 'stream' and cell['ttfb_samples'] is not None else '–'} | {errors} | "
            f"{cell['peak_rss_mib']:.0f} MiB |"
        )

    # lmstack's throughput beside each peer, and the targets.
    peers = [("litellm", 50.0), ("portkey", 5.0), ("nginx", 0.5)]
    gateways = [t for t in dict.fromkeys(k[0] for k in order) if t.startswith("lmstack")]
    if not gateways:
        return
    print("\nThroughput ratios (lmstack's req/s ÷ the peer's; the issue's target in brackets):\n")
    header = "| lmstack | mode | conc. | " + " | ".join(f"÷ {p} (≥ {t:g})" for p, t in peers) + " | added p50 (≤ 100 µs at 16) | added p99 (≤ 1 ms at 16) |"
    print(header)
    print("|---|---|--:|" + "--:|" * len(peers) + "--:|--:|")
    for gateway in gateways:
        for key in order:
            if key[0] != gateway:
                continue
            _, mode, conc = key
            cell = cells[key]
            ratios = []
            for peer, target in peers:
                other = cells.get((peer, mode, conc))
                if not other or not other["rps"]:
                    ratios.append("–")
                    continue
                ratio = cell["rps"] / other["rps"]
                ratios.append(f"{ratio:.2f} {'✓' if ratio >= target else '✗'}")
            floor = cells.get(("mock", mode, conc))
            p50 = p99 = "–"
            if floor:
                d50 = cell["p50_us"] - floor["p50_us"]
                d99 = cell["p99_us"] - floor["p99_us"]
                p50 = added(cell["p50_us"], floor["p50_us"]) + (f" {'✓' if d50 <= 100 else '✗'}" if conc == 16 else "")
                p99 = added(cell["p99_us"], floor["p99_us"]) + (f" {'✓' if d99 <= 1000 else '✗'}" if conc == 16 else "")
            print(f"| {gateway} | {mode} | {conc} | " + " | ".join(ratios) + f" | {p50} | {p99} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
