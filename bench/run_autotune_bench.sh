#!/usr/bin/env bash
# The continuous thread autotuner (issue 11 §3) against fixed thread counts, on cifar-train with a
# consumer that SPINS X ms per batch (dsc bench --consumer-ms X --consumer-spin). For each X: fixed
# 1..N threads (N = cores) and --threads auto (at most N), side by side in each of ROUNDS rounds; per
# config the median over rounds of dsc bench's images/s (itself the median of the epochs after the
# first). Printed per X: each config's images/s, auto / best fixed (goal >= 0.95), auto's final
# threads against the smallest fixed count within 5% of the best (goal: no more), and the batch of
# epoch 0 at which auto settled (the controller starts there; goal: within 50 batches, then no change
# for 20) with the changes it made in the later epochs.
# usage: bench/run_autotune_bench.sh [BUILD_DIR] [ROUNDS] ["X X ..."]
set -euo pipefail
source "$(dirname "$0")/common.sh"
rounds=${2:-3}
xs=${3:-"1 2 5 20"}
file=$work/autotune-cifar.beton
[ -f "$file" ] || "$build/dsc" build "$data/train" "$file" --quiet > /dev/null
cat "$file" > /dev/null  # warm the page cache
n=$(nproc)
echo "machine: $n cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "cifar-train, batch 512, 3 epochs per run, $rounds rounds, consumer spins X ms per batch"
out=$work/autotune-runs.tsv
: > "$out"
for x in $xs; do
  for r in $(seq "$rounds"); do
    for t in $(seq "$n") auto; do
      "$build/dsc" bench "$file" --preset cifar-train --epochs 3 --threads "$t" --consumer-ms "$x" --consumer-spin --json |
        /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
e = j["epochs"]
print("\t".join(str(v) for v in [sys.argv[1], sys.argv[2], j["images_per_second"], e[0]["settled_batch"],
      sum(x["thread_changes"] for x in e[1:]), e[-1]["threads"]]))' "$x" "$t" >> "$out"
    done
  done
done
/usr/bin/python3 - "$out" "$n" <<'EOF'
import collections, statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
n = int(sys.argv[2])
by = collections.defaultdict(list)
for x, t, rate, settled, later, threads in rows:
    by[(x, t)].append((float(rate), int(settled), int(later), int(threads)))
xs = list(dict.fromkeys(r[0] for r in rows))
configs = [str(t) for t in range(1, n + 1)] + ["auto"]
print("\n%-6s " % "X ms" + " ".join("%9s" % ("fixed " + c if c != "auto" else "auto") for c in configs) +
      "   auto/best  auto threads  smallest fixed within 5%  settled at batch (epoch 0)  later changes")
for x in xs:
    med = {c: statistics.median(v[0] for v in by[(x, c)]) for c in configs}
    best = max(med[c] for c in configs if c != "auto")
    smallest = min(int(c) for c in configs if c != "auto" and med[c] >= 0.95 * best)
    auto = by[(x, "auto")]
    threads = [v[3] for v in auto]
    settled = [v[1] for v in auto]
    later = [v[2] for v in auto]
    print("%-6s " % x + " ".join("%9.0f" % med[c] for c in configs) +
          "   %9.3f  %12s  %24d  %26s  %13s" % (med["auto"] / best, ",".join(map(str, threads)), smallest,
                                                   ",".join(map(str, settled)), ",".join(map(str, later))))
EOF
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
