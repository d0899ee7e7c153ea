"""Reads a Chrome/Perfetto trace-event JSON file with Python's own json parser (independent of the
C++ writer) and prints one line per (kind, group, row, event name): its count and, for counters, the
last value. Exits non-zero on malformed JSON or events (negative times, rows without names)."""
import collections
import json
import sys

events = json.load(open(sys.argv[1]))["traceEvents"]
groups, rows = {}, {}
for e in events:
    if e["ph"] == "M" and e["name"] == "process_name":
        groups[e["pid"]] = e["args"]["name"]
    elif e["ph"] == "M" and e["name"] == "thread_name":
        rows[(e["pid"], e["tid"])] = e["args"]["name"]
count, last = collections.Counter(), {}
for e in events:
    if e["ph"] == "X":
        assert e["ts"] >= 0 and e["dur"] >= 0, e
        count[("span", groups[e["pid"]], rows[(e["pid"], e["tid"])], e["name"])] += 1
    elif e["ph"] == "C":
        assert e["ts"] >= 0, e
        key = ("counter", groups[e["pid"]], e["name"], "value")
        count[key] += 1
        last[key] = e["args"]["value"]
    elif e["ph"] != "M":
        sys.exit("unexpected event %r" % e)
for key, n in sorted(count.items()):
    print("\t".join(key) + "\t%d\t%s" % (n, last.get(key, "")))
