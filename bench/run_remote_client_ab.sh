#!/usr/bin/env bash
# The remote client (the training process) before and after a change: two dsc binaries as clients of
# one `dsc serve --threads 1` of the after binary (pinned to core 1, serving CIFAR-10 and the 500
# photos), each client pinned to core 0 with --local-threads 0, float32 NCHW, 4 epochs, the two
# binaries' order alternating round by round. For CIFAR (cifar-train, batch 512) with --wire-rows and
# with --wire-planes (both binaries must know them), and the photos (imagenet-train, batch 64):
# medians of the client's CPU us per image (getrusage, epochs after the first), its images/s and the
# worker's CPU us per image (from /proc over the client's run), and the median of the after / before
# ratios of the rounds' pairs. Whole-process figures. The files are those of bench/run_remote_bench.sh
# (built when missing).
# usage: bench/run_remote_client_ab.sh BEFORE_DSC [BUILD_DIR] [ROUNDS]
set -euo pipefail
before=$(realpath "$1")
. "$(dirname "$0")/common.sh" "${2:-}"
rounds=${3:-6}
after=$build/dsc
remote_files "$after"
py=/usr/bin/python3
modes=("cifar--wire-rows cifar.beton cifar-train 512 --wire-rows" "cifar--wire-planes cifar.beton cifar-train 512 --wire-planes"
       "photos photos.beton imagenet-train 64")
wcpu() { awk -v t="$(getconf CLK_TCK)" '{print ($14 + $15) / t}' "/proc/$pid/stat"; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq "$rounds"); do
  taskset -c 1 "$after" serve "$rw/cifar.beton" "$rw/photos.beton" --threads 1 > "$rw/serve.out" 2>&1 &
  pid=$!
  for _ in $(seq 100); do grep -q listening "$rw/serve.out" 2>/dev/null && break; sleep 0.1; done
  addr=$(sed -n 's/listening on //p' "$rw/serve.out")
  order="before after"
  [ $((r % 2)) = 0 ] && order="after before"
  for mode in "${modes[@]}"; do
    read -r name file preset batch extra <<< "$mode"
    for b in $order; do
      w0=$(wcpu)
      j=$(taskset -c 0 "${!b}" bench "$rw/$file" --preset "$preset" --batch-size "$batch" --dtype float32 --epochs 4 \
            --json --remote "$addr" --local-threads 0 $extra)
      w1=$(wcpu)
      echo "$j" | "$py" -c "
import json, sys
d = json.load(sys.stdin)
n = sum(w['samples'] for w in d['remote'])
print('$r', '$name', '$b', d['cpu_us_per_image'], d['images_per_second'], ($w1 - $w0) * 1e6 / n)" >> "$out"
    done
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); rounds: $rounds"
"$py" - "$out" <<'EOF'
import collections, statistics as st, sys
runs = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, name, b, *v = line.split()
    runs[(name, b)][r] = [float(x) for x in v]
for name in dict.fromkeys(n for n, _ in runs):
    bf, af = runs[(name, 'before')], runs[(name, 'after')]
    rs = [r for r in bf if r in af]
    for k, what in enumerate(['client CPU us/image', 'images/s', 'worker CPU us/image']):
        mb, ma = st.median(bf[r][k] for r in rs), st.median(af[r][k] for r in rs)
        pairs = st.median(af[r][k] / bf[r][k] for r in rs)
        print(f"{name:17s} {what:20s} {mb:10.2f} -> {ma:10.2f}   pairs after/before: median {pairs:.2f}x")
EOF
