#!/usr/bin/env bash
# The remote client (the training process) under two builds or settings, counted in perf samples: on
# this VM ten whole-process pairs scatter by +-20%; perf's samples per library are steadier, though an
# A/A run still moved pair medians by up to 7% (bench/RESULTS.md, session 37). One `dsc serve
# --threads 1` of BUILD_DIR's dsc pinned to core 1; each client pinned to core 0 with --local-threads 0,
# CIFAR-10 (cifar-train, batch 512, DTYPE), 8 epochs under `perf record -F 4999 -D 1500` (the first
# 1.5 s, startup and the ring's first faults, left out), the order alternating round by round.
# A and B are client commands: a dsc path, optionally after `env NAME=VALUE` (a temporary switch).
# Printed per run: the client's CPU us per image (dsc bench's own figure), all samples, and samples
# in gRPC (libgrpc, libgrpc++, gpr, abseil, protobuf), the kernel, libc, dsc and libxxhash; with
# SYMS=REGEX also the samples of each symbol matching it. Then the medians and the median of B / A
# over the rounds' pairs. Extra dsc bench flags go after the rounds, e.g. --digest.
# usage: bench/run_remote_perf_ab.sh "A" "B" [BUILD_DIR] [ROUNDS] [DTYPE] [BENCH_FLAGS...]
set -euo pipefail
A=$1
B=$2
. "$(dirname "$0")/common.sh" "${3:-}"
rounds=${4:-5}
dtype=${5:-float32}
shift $(( $# < 5 ? $# : 5 ))
extra=("$@")
command -v perf > /dev/null || { echo "run_remote_perf_ab.sh: needs perf (linux-perf)" >&2; exit 2; }
remote_files "$build/dsc"
out=$(mktemp)
data_file=$(mktemp)
log=$(mktemp)
trap 'rm -f "$out" "$data_file" "$log"; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true' EXIT
taskset -c 1 "$build/dsc" serve "$rw/cifar.beton" --threads 1 > "$rw/serve.out" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q listening "$rw/serve.out" 2>/dev/null && break; sleep 0.1; done
addr=$(sed -n 's/listening on //p' "$rw/serve.out")
for r in $(seq "$rounds"); do
  order="A B"
  [ $((r % 2)) = 0 ] && order="B A"
  for side in $order; do
    read -r -a cmd <<< "${!side}"
    if ! taskset -c 0 perf record -q -F 4999 -D 1500 -o "$data_file" "${cmd[@]}" bench "$rw/cifar.beton" \
           --preset cifar-train --batch-size 512 --dtype "$dtype" --epochs 8 --remote "$addr" --local-threads 0 \
           "${extra[@]}" > "$log" 2>&1; then
      echo "run_remote_perf_ab.sh: client $side (${!side}) failed:" >&2
      tail -5 "$log" >&2
      exit 1
    fi
    cpu=$(sed -n 's/.*per delivered image: \([0-9.]*\) us.*/\1/p' "$log")
    groups=$(perf report -i "$data_file" --stdio --no-children -g none --sort dso -F sample,dso 2>/dev/null |
      awk '$1 ~ /^[0-9]+$/ {t += $1}
           /libgrpc|libgpr|libabsl|libprotobuf/ {g += $1} /kernel/ {k += $1} /libc\.so/ {c += $1}
           $2 ~ /^dsc/ {d += $1} /xxhash/ {x += $1}
           END {printf "all %d grpc %d kernel %d libc %d dsc %d xxhash %d", t, g, k, c, d, x}')
    syms=""
    if [ -n "${SYMS:-}" ]; then
      syms=$(perf report -i "$data_file" --stdio --no-children -g none --sort sym -F sample,sym 2>/dev/null |
        awk -v re="$SYMS" '$1 ~ /^[0-9]+$/ && $0 ~ re {n = $NF; sub(/.*::/, "", n); gsub(/[^A-Za-z0-9_]/, "", n); printf " %s %d", n, $1}')
    fi
    echo "$r $side cpu $cpu $groups$syms" | tee -a "$out"
  done
done
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); rounds: $rounds; dtype: $dtype"
/usr/bin/python3 - "$out" <<'EOF'
import collections, statistics as st, sys
runs = collections.defaultdict(dict)  # side -> round -> {name: value}
for line in open(sys.argv[1]):
    f = line.split()
    r, side, rest = f[0], f[1], f[2:]
    runs[side][r] = {rest[i]: float(rest[i + 1]) for i in range(0, len(rest) - 1, 2)}
rounds = [r for r in runs['A'] if r in runs['B']]
names = list(dict.fromkeys(n for s in 'AB' for r in rounds for n in runs[s][r]))
print(f"{'':28s} {'A median':>10s} {'B median':>10s}  B/A pairs: median (range)")
for n in names:
    pairs = [(runs['A'][r].get(n, 0), runs['B'][r].get(n, 0)) for r in rounds]
    if not any(a or b for a, b in pairs):
        continue
    ratios = [b / a for a, b in pairs if a > 0]
    ma, mb = st.median(a for a, _ in pairs), st.median(b for _, b in pairs)
    rs = f"{st.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})" if ratios else "-"
    print(f"{n[:28]:28s} {ma:10.2f} {mb:10.2f}  {rs}")
EOF
