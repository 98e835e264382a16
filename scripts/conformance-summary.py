#!/usr/bin/env python3
"""Summarize a scripts/conformance.sh run from Ginkgo's JUnit reports.

    conformance-summary.py RESULTS_DIR SINGLE_NODE_LIST [--single-node] [--expect SPECS_FILE]

Reads RESULTS_DIR/junit_*.xml (one per part: parallel, serial) and RESULTS_DIR/wall-seconds.txt, and prints
the [Conformance] specs (when none ran: every spec that ran) by outcome (passed, failed with the first line of
why, skipped), the ones left out on
one node with the upstream line that says why (SINGLE_NODE_LIST, when --single-node), counts and wall time.
With --expect, every spec SPECS_FILE names (one per line, "#" lines aside) must have passed.
Exit status 1 when a spec failed (or an expected one did not pass), else 0.
"""
import argparse
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET


def specs(results, conformance=True):
    """{name: (part, status, message)} of every [Conformance] spec in the JUnit reports (every spec when
    not `conformance`). Each part's report lists every spec; one the part did not select (its label filter,
    --focus, --skip) is "skipped" with the bare message "skipped", and status "not run" here unless another
    part ran it. A spec that ran and skipped itself (e2eskipper) says why after "skipped - "."""
    out = {}
    for path in sorted(glob.glob(os.path.join(results, "junit_*.xml"))):
        part = os.path.basename(path)[len("junit_"):-len(".xml")]
        for case in ET.parse(path).getroot().iter("testcase"):
            name = case.get("name", "")
            if not name.startswith("[It] ") or (conformance and "[Conformance]" not in name):
                continue  # suite set-up nodes, and specs outside the suite
            name = re.sub(r"^\[It\] ", "", name)
            name = re.sub(r" \[[^\]]*(, [^\]]*)*\]$", "", name)  # the labels Ginkgo appends
            status = case.get("status") or "passed"
            failure = case.find("failure")
            if failure is None:
                failure = case.find("error")
            skipped = case.find("skipped")
            message = ""
            if failure is not None:
                text = (failure.get("message") or failure.text or "").strip()
                lines = [l.strip() for l in text.splitlines() if l.strip()]
                # Gomega's "Expected <x> to contain substring <y>": the first line says little alone.
                message = " ... ".join(lines[:1] + lines[-2:]) if len(lines) > 3 else " ".join(lines)
            elif skipped is not None:
                message = (skipped.get("message") or "").strip()
                if message == "skipped":
                    status, message = "not run", ""
                else:
                    message = re.sub(r"^skipped - ", "", message)
            if status == "not run" and name in out:
                continue
            out[name] = (part, status, message)
    return out


def single_node_list(path):
    out = []
    with open(path) as f:
        for line in f:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            regex, _, why = line.rstrip("\n").partition("\t")
            out.append((regex, why))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results")
    p.add_argument("single_node_list")
    p.add_argument("--single-node", action="store_true")
    p.add_argument("--expect")
    args = p.parse_args()
    results, list_path, single = args.results, args.single_node_list, args.single_node
    found = specs(results)
    suite = "Conformance specs"
    if all(status == "not run" for _, status, _ in found.values()):
        # A run of other specs (conformance.sh --labels, scripts/e2e-addons.sh): every spec it ran.
        found = {n: r for n, r in specs(results, conformance=False).items() if r[1] != "not run"}
        suite = "specs run"
    rows = [(part, name, status, message) for name, (part, status, message) in found.items()]
    left_out = single_node_list(list_path) if single else []

    def left_out_why(name):
        for regex, why in left_out:
            if re.search(regex, name):
                return why
        return None

    passed = [r for r in rows if r[2] == "passed"]
    failed = [r for r in rows if r[2] in ("failed", "panicked", "interrupted", "aborted", "timedout")]
    skipped = [r for r in rows if r[2] in ("skipped", "pending")]
    not_run = [r for r in rows if r[2] == "not run"]
    single_rows = [r for r in not_run if left_out_why(r[1]) is not None]
    unselected = len(not_run) - len(single_rows)

    wall = {}
    wall_path = os.path.join(results, "wall-seconds.txt")
    if os.path.exists(wall_path):
        with open(wall_path) as f:
            for line in f:
                part, _, secs = line.partition(" ")
                wall[part] = int(secs)

    print(f"results: {results}")
    for title, group in (("FAILED", failed), ("skipped by e2e itself", skipped)):
        if group:
            print(f"\n{title} ({len(group)}):")
            for part, name, status, message in sorted(group, key=lambda r: r[1]):
                print(f"  [{part}] {name}" + (f"\n      {status}: {message}" if message else ""))
    if single_rows:
        print(f"\nleft out on one node by upstream's design ({len(single_rows)}):")
        for part, name, _, _ in sorted(single_rows, key=lambda r: r[1]):
            print(f"  {name}\n      upstream: {left_out_why(name)}")
    print(f"\npassed ({len(passed)}):")
    for part, name, _, _ in sorted(passed, key=lambda r: r[1]):
        print(f"  [{part}] {name}")
    parts = ", ".join(f"{p} {s // 60}m{s % 60:02d}s" for p, s in wall.items())
    total = sum(wall.values())
    print(f"\n{len(rows)} {suite}: {len(passed)} passed, {len(failed)} failed,"
          f" {len(skipped)} skipped by e2e itself, {len(single_rows)} left out on one node,"
          f" {unselected} not selected (--focus/--skip); wall time {total // 60}m{total % 60:02d}s ({parts})")
    missing = []
    if args.expect:
        with open(args.expect) as f:
            expected = [l.strip() for l in f if l.strip() and not l.lstrip().startswith("#")]
        passed_names = {r[1] for r in passed}
        missing = [n for n in expected if n not in passed_names]
        for n in missing:
            print(f"EXPECTED TO PASS, did not: {n}")
        if not missing:
            print(f"all {len(expected)} specs of {args.expect} passed")
    sys.exit(1 if failed or missing else 0)


if __name__ == "__main__":
    main()
