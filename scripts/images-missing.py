#!/usr/bin/env python3
"""The images of an images.txt ("ARCHIVE REFERENCE" lines, then "#" lines of where each came from) that not
every node lists in its status (`kubectl get nodes -o json` on stdin): one reference per line.

    kubectl get nodes -o json | scripts/images-missing.py DIR/images.txt
"""
import json
import sys

wanted = [line.split()[1] for line in open(sys.argv[1]) if line.strip() and not line.startswith("#")]
nodes = json.load(sys.stdin)["items"]
on_all = set.intersection(*[{n for i in node["status"].get("images", []) for n in i.get("names", [])}
                            for node in nodes]) if nodes else set()
print("\n".join(w for w in wanted if w not in on_all))
