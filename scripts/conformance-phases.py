#!/usr/bin/env python3
"""Where a conformance run's time went, from Ginkgo's JSON reports and the kubelets' metrics.

    conformance-phases.py RESULTS_DIR

RESULTS_DIR is scripts/conformance.sh's: report_parallel.json and report_serial.json (ginkgo
--json-report), wall-seconds.txt, and kubelet-metrics-NODE.txt (each node's /metrics at the end).
Prints, per part (parallel, serial):
  - wall time, the specs' summed run time and how many ran at once on average;
  - the time spent in each kind of Ginkgo node (BeforeEach: the framework making a namespace and
    waiting for its ServiceAccount; It: the spec; AfterEach/DeferCleanup: deleting the namespace),
    summed over the specs;
  - the steps (By) that took longest in total, by text, with their count: the specs' own waits
    show up here;
  - the longest specs.
And the kubelets' pod start latency (kubelet_pod_start_sli_duration_seconds: from a pod's
creation to its containers started, image pulls excluded), as quantiles of the histogram.
Python's standard library only.
"""
import collections
import glob
import json
import os
import re
import sys
from datetime import datetime


def parse_time(s):
    # Go's RFC 3339 with nanoseconds; Python takes microseconds.
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", s)
    if not m:
        return None
    frac = (m.group(2) or ".0")[:7]
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(m.group(1) + frac + tz).timestamp()


def spec_name(r):
    return " ".join(r.get("ContainerHierarchyTexts") or []) + " " + r.get("LeafNodeText", "")


def step_text(msg):
    # Numbers and names that differ from spec to spec (namespaces, pod names) out of the key.
    msg = re.sub(r"\"[^\"]*\"", '"…"', msg)
    msg = re.sub(r"\b[a-z0-9-]+-\d+(-[a-z0-9]+)*\b", "…", msg)
    msg = re.sub(r"\d+", "N", msg)
    return msg[:110]


def part(results, name, wall):
    path = os.path.join(results, f"report_{name}.json")
    if not os.path.exists(path):
        return
    with open(path) as f:
        suites = json.load(f)
    specs = [r for s in suites for r in s.get("SpecReports") or []
             if r.get("LeafNodeType") == "It" and r.get("State") != "skipped"]
    if not specs:
        return
    run_time = sum(r.get("RunTime", 0) for r in specs) / 1e9
    print(f"{name}: {len(specs)} specs, wall {wall:.0f}s, summed run time {run_time:.0f}s"
          + (f", {run_time / wall:.1f} at once on average" if wall else ""))

    by_node = collections.Counter()
    steps = collections.Counter()
    step_count = collections.Counter()
    for r in specs:
        events = r.get("SpecEvents") or []
        for e in events:
            if e.get("SpecEventType") == "Node (End)":
                by_node[e.get("NodeType", "?")] += e.get("Duration", 0) / 1e9
        # A step lasts until the next event of the spec (Ginkgo records no end for a plain By).
        timed = [(parse_time(e["TimelineLocation"]["Time"]), e) for e in events
                 if e.get("TimelineLocation", {}).get("Time")]
        timed = [(t, e) for t, e in timed if t is not None]
        end = parse_time(r["EndTime"]) if r.get("EndTime") else None
        for i, (t, e) in enumerate(timed):
            if e.get("SpecEventType") != "By":
                continue
            nxt = timed[i + 1][0] if i + 1 < len(timed) else end
            if nxt is None:
                continue
            key = step_text(e.get("Message", ""))
            steps[key] += max(0.0, nxt - t)
            step_count[key] += 1
    print("  time by Ginkgo node, summed over the specs:")
    for node, secs in by_node.most_common():
        print(f"    {secs:8.0f}s  {node}")
    print("  steps that took longest in total (count, then the step's text):")
    for key, secs in steps.most_common(15):
        print(f"    {secs:8.0f}s  {step_count[key]:4d}x  {key}")
    print("  longest specs:")
    for r in sorted(specs, key=lambda r: -r.get("RunTime", 0))[:10]:
        print(f"    {r.get('RunTime', 0) / 1e9:8.0f}s  {spec_name(r)[:120]}")
    print()


def quantile(buckets, count, q):
    """'<= B s' for the bucket holding quantile q (Prometheus histogram, cumulative)."""
    want = q * count
    finite = [le for le, _ in buckets if le != float("inf")]
    for le, c in buckets:
        if c >= want:
            return f"<= {le:g}s" if le != float("inf") else f"> {max(finite, default=0):g}s"
    return "?"


def pod_start(results):
    for path in sorted(glob.glob(os.path.join(results, "kubelet-metrics-*.txt"))):
        node = os.path.basename(path)[len("kubelet-metrics-"):-len(".txt")]
        buckets, count, total = [], 0, 0.0
        with open(path) as f:
            for line in f:
                if not line.startswith("kubelet_pod_start_sli_duration_seconds"):
                    continue
                m = re.match(r'\S+_bucket\{.*le="([^"]+)".*\} (\S+)', line)
                if m:
                    buckets.append((float(m.group(1)), float(m.group(2))))
                elif "_count" in line.split("{")[0].split(" ")[0]:
                    count = float(line.split()[-1])
                elif "_sum" in line.split("{")[0].split(" ")[0]:
                    total = float(line.split()[-1])
        if not count:
            continue
        buckets.sort()
        qs = ", ".join(f"p{int(q * 100)} {quantile(buckets, count, q)}" for q in (0.5, 0.9, 0.99))
        print(f"pod start latency on {node} (kubelet_pod_start_sli_duration_seconds, image pulls "
              f"excluded): {int(count)} pods, mean {total / count:.2f}s, {qs}")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    results = sys.argv[1]
    walls = {}
    wall_file = os.path.join(results, "wall-seconds.txt")
    if os.path.exists(wall_file):
        with open(wall_file) as f:
            for line in f:
                name, secs = line.split()
                walls[name] = float(secs)
    for name in ("parallel", "serial"):
        part(results, name, walls.get(name, 0.0))
    pod_start(results)


if __name__ == "__main__":
    main()
