#!/usr/bin/env bash
# Remote workers on loopback against local decoding, side by side per round.
# Local baseline: `dsc bench --threads 1` (one decode thread + the consumer) on cores 0-1. Remote: one
# `dsc serve --threads 1` pinned to core 1, the client pinned to core 0 with --local-threads 0.
# Prints medians of: images/s, the client process's CPU time per delivered image (getrusage over
# whole epochs, every thread including gRPC's; epochs after the first), and wire bytes per image with
# and without --wire-compression; for cifar-train on CIFAR-10 and imagenet-train on the 500 photos,
# delivering float32 NCHW and uint8 NHWC (the GPU path's form); the worker process's CPU time per image;
# for float32 also with --ship-uint8=false (workers send finished float32 batches instead of uint8) and
# with --wire-planes (uncropped JPEGs as their YCbCr planes instead of the default RGB rows).
# usage: bench/run_remote_bench.sh [BUILD_DIR] [ROUNDS] [EPOCHS]
set -euo pipefail
. "$(dirname "$0")/common.sh"
rounds=${2:-3}
epochs=${3:-4}
dsc=$build/dsc
py=/usr/bin/python3
remote_files "$dsc"
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
rsamples() { "$py" -c "import json,sys; print(sum(w['samples'] for w in json.load(sys.stdin)['remote']))"; }
field() { "$py" -c "import json,sys; d=json.load(sys.stdin); print(d.get('$1', 0))"; }

worker_cpu() { awk -v t="$(getconf CLK_TCK)" '{print ($14 + $15) / t}' "/proc/$pid/stat"; }  # seconds

serve() {  # starts a pinned worker on $1; sets pid and addr
  "$@" > "$rw/serve.out" 2> "$rw/serve.err" &
  pid=$!
  for _ in $(seq 100); do grep -q listening "$rw/serve.out" 2>/dev/null && break; sleep 0.1; done
  addr=$(sed -n 's/listening on //p' "$rw/serve.out")
}

echo "machine: $(nproc) cores, $(uname -r); load: $(cut -d' ' -f1-3 /proc/loadavg)"
for job in "cifar-train cifar.beton 512" "imagenet-train photos.beton 64"; do
  set -- $job
  preset=$1 file=$rw/$2 batch=$3
  for dtype in float32 uint8; do
    declare -A v=()
    for r in $(seq "$rounds"); do
      common=(--preset "$preset" --dtype "$dtype" --batch-size "$batch" --epochs "$epochs" --json)
      j=$(taskset -c 0,1 "$dsc" bench "$file" "${common[@]}" --threads 1)
      v[local_ips]+="$(echo "$j" | field images_per_second) "
      v[local_cpu]+="$(echo "$j" | field cpu_us_per_image) "
      serve taskset -c 1 "$dsc" serve "$file" --threads 1
      w0=$(worker_cpu)
      j=$(taskset -c 0 "$dsc" bench "$file" "${common[@]}" --remote "$addr" --local-threads 0)
      w1=$(worker_cpu)
      v[remote_ips]+="$(echo "$j" | field images_per_second) "
      v[remote_cpu]+="$(echo "$j" | field cpu_us_per_image) "
      v[wire]+="$(echo "$j" | field remote_wire_bytes_per_image) "
      v[worker_cpu]+="$(echo "($w1 - $w0) * 1000000 / $(echo "$j" | rsamples)" | bc -l) "
      if [ "$dtype" = float32 ]; then  # workers send the finished float32 batch (the old wire)
        j=$(taskset -c 0 "$dsc" bench "$file" "${common[@]}" --remote "$addr" --local-threads 0 --ship-uint8=false)
        v[fin_ips]+="$(echo "$j" | field images_per_second) "
        v[fin_cpu]+="$(echo "$j" | field cpu_us_per_image) "
        v[fin_wire]+="$(echo "$j" | field remote_wire_bytes_per_image) "
        # uncropped JPEGs as their YCbCr planes instead of RGB rows (CIFAR; the photos' crops travel as
        # rows either way)
        j=$(taskset -c 0 "$dsc" bench "$file" "${common[@]}" --remote "$addr" --local-threads 0 --wire-planes)
        v[pl_ips]+="$(echo "$j" | field images_per_second) "
        v[pl_cpu]+="$(echo "$j" | field cpu_us_per_image) "
        v[pl_wire]+="$(echo "$j" | field remote_wire_bytes_per_image) "
      fi
      j=$(taskset -c 0 "$dsc" bench "$file" "${common[@]}" --remote "$addr" --local-threads 0 --wire-compression)
      v[zwire]+="$(echo "$j" | field remote_wire_bytes_per_image) "
      v[zcpu]+="$(echo "$j" | field cpu_us_per_image) "
      kill "$pid"; wait "$pid" 2>/dev/null || true
    done
    m() { echo "${v[$1]}" | tr ' ' '\n' | grep . | median; }
    li=$(m local_ips) lc=$(m local_cpu) ri=$(m remote_ips) rc=$(m remote_cpu) wi=$(m wire) zw=$(m zwire) zc=$(m zcpu)
    printf "%-15s %-8s worker CPU %.1f us/img (local thread's process: %.1f)\n" "$preset" "$dtype" "$(m worker_cpu)" "$lc"
    if [ "$dtype" = float32 ]; then
      fi_=$(m fin_ips) fc=$(m fin_cpu)
      printf "%-15s %-8s --ship-uint8=false: remote %8.0f img/s (%.2fx) %7.1f us CPU/img (%.0f%% of local), wire %.0f B/img\n" \
        "$preset" "$dtype" "$fi_" "$(echo "$fi_ / $li" | bc -l)" "$fc" "$(echo "100 * $fc / $lc" | bc -l)" "$(m fin_wire)"
      pi=$(m pl_ips) pc=$(m pl_cpu)
      printf "%-15s %-8s --wire-planes:   remote %8.0f img/s (%.2fx) %7.1f us CPU/img (%.0f%% of local), wire %.0f B/img\n" \
        "$preset" "$dtype" "$pi" "$(echo "$pi / $li" | bc -l)" "$pc" "$(echo "100 * $pc / $lc" | bc -l)" "$(m pl_wire)"
    fi
    printf "%-15s %-8s local %8.0f img/s %7.1f us CPU/img | remote %8.0f img/s (%.2fx) %7.1f us CPU/img (%.0f%% of local) | wire %.0f B/img, zstd %.0f B/img (%.1f us CPU/img)\n" \
      "$preset" "$dtype" "$li" "$lc" "$ri" "$(echo "$ri / $li" | bc -l)" "$rc" "$(echo "100 * $rc / $lc" | bc -l)" "$wi" "$zw" "$zc"
    unset v
  done
done
