#!/usr/bin/env python3
"""The networks the profiles and tests use, for keep_test_networks_local (scripts/lib.sh) to keep here.

Derived, not listed by hand: every IPv4/IPv6 network written in profiles/, tests/ and scripts/ (what makes
environments and sends packets; src/'s unit tests send none) that lies in a private, shared or
documentation/benchmark block (no public address), collapsed. Left out: any network that holds this machine's
own addresses or gateways (--keep, repeatable), and TEST-NET-3 (203.0.113.0/24), where this workplace's
machines reach their package registries.

  scripts/test-networks.py [--keep CIDR_OR_ADDRESS]...     one network per line
"""
import argparse
import ipaddress
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCES = ["profiles", "tests", "scripts"]
# Blocks a test may take addresses from: none of them is routed on the internet.
ALLOWED = [ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "198.18.0.0/15",
    "192.0.2.0/24", "198.51.100.0/24", "fc00::/7", "2001:db8::/32",
)]
NEVER = [ipaddress.ip_network("203.0.113.0/24")]
V4 = re.compile(r"(?<![\w.:])(\d{1,3}(?:\.\d{1,3}){3}/\d{1,3})(?![\w.])")
V6 = re.compile(r"(?<![\w:])([0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{0,4}){1,7}/\d{1,3})(?![\w:])")


def found_networks():
    for source in SOURCES:
        for path in sorted((ROOT / source).rglob("*")):
            if path == pathlib.Path(__file__).resolve():
                continue  # its own list of blocks
            if not path.is_file() or path.suffix not in (".rs", ".yaml", ".yml", ".hbs", ".sh", ".py", ".json"):
                continue
            text = path.read_text(errors="replace")
            for match in V4.findall(text) + V6.findall(text):
                try:
                    yield ipaddress.ip_network(match, strict=False)
                except ValueError:
                    continue  # a deliberately wrong value of a test (10.0.0.0/33)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="append", default=[], help="a network of this machine's, never listed")
    args = parser.parse_args()
    keep = [ipaddress.ip_network(k, strict=False) for k in args.keep] + NEVER
    chosen = []
    for net in set(found_networks()):
        if net.prefixlen == 0 or not any(net.version == a.version and net.subnet_of(a) for a in ALLOWED):
            continue
        if any(net.version == k.version and net.overlaps(k) for k in keep):
            continue
        chosen.append(net)
    for version in (4, 6):
        for net in ipaddress.collapse_addresses(n for n in chosen if n.version == version):
            print(net)


if __name__ == "__main__":
    sys.exit(main())
