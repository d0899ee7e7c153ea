#!/usr/bin/env bash
# CIFAR-10 (cifar-train) before and after a change, for the paths the remote workers touch, two dsc
# binaries alternating round by round (whole-process `dsc bench`, medians):
# - the local loader, one thread (cores 0-1), float32 NCHW and uint8 NHWC: CPU us per image, images/s;
# - the remote client (core 0, --local-threads 0, float32) of one `dsc serve --threads 1` of the
#   after binary (core 1);
# - the worker (core 1, uint8), each binary's `dsc serve` under the after binary's client: the
#   worker's CPU us per image (from /proc) and the client's images/s.
# usage: bench/run_remote_before_after.sh BEFORE_DSC [BUILD_DIR] [ROUNDS]
set -euo pipefail
before=$(realpath "$1")
shift
. "$(dirname "$0")/common.sh"
rounds=${2:-5}
after=$build/dsc
remote_files "$after"
f=$rw/cifar.beton
py=/usr/bin/python3
field() { "$py" -c "import json,sys; d=json.load(sys.stdin); print(d.get('$1', 0))"; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
serve() {  # starts a pinned worker; sets pid and addr
  "$@" > "$work/remote/serve.out" 2>&1 &
  pid=$!
  for _ in $(seq 100); do grep -q listening "$work/remote/serve.out" 2>/dev/null && break; sleep 0.1; done
  addr=$(sed -n 's/listening on //p' "$work/remote/serve.out")
}
wcpu() { awk -v t="$(getconf CLK_TCK)" '{print ($14 + $15) / t}' "/proc/$pid/stat"; }
common=(--preset cifar-train --batch-size 512 --epochs 4 --json)
declare -A v=()
for _ in $(seq "$rounds"); do
  for dt in float32 uint8; do
    for b in before after; do
      j=$(taskset -c 0,1 "${!b}" bench "$f" "${common[@]}" --dtype $dt --threads 1)
      v[local_${dt}_cpu_$b]+="$(echo "$j" | field cpu_us_per_image) "
      v[local_${dt}_ips_$b]+="$(echo "$j" | field images_per_second) "
    done
  done
  serve taskset -c 1 "$after" serve "$f" --threads 1
  for b in before after; do
    j=$(taskset -c 0 "${!b}" bench "$f" "${common[@]}" --dtype float32 --remote "$addr" --local-threads 0)
    v[client_cpu_$b]+="$(echo "$j" | field cpu_us_per_image) "
    v[client_ips_$b]+="$(echo "$j" | field images_per_second) "
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
  for b in before after; do
    serve taskset -c 1 "${!b}" serve "$f" --threads 1
    w0=$(wcpu)
    j=$(taskset -c 0 "$after" bench "$f" "${common[@]}" --dtype uint8 --remote "$addr" --local-threads 0)
    w1=$(wcpu)
    n=$(echo "$j" | "$py" -c "import json,sys; print(sum(w['samples'] for w in json.load(sys.stdin)['remote']))")
    v[worker_cpu_$b]+="$(echo "($w1 - $w0) * 1000000 / $n" | bc -l) "
    v[worker_ips_$b]+="$(echo "$j" | field images_per_second) "
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); rounds: $rounds (medians)"
m() { echo "${v[$1]}" | tr ' ' '\n' | grep . | median; }
for k in local_float32 local_uint8 client worker; do
  cb=$(m ${k}_cpu_before) ca=$(m ${k}_cpu_after) ib=$(m ${k}_ips_before) ia=$(m ${k}_ips_after)
  awk -v k="$k" -v cb="$cb" -v ca="$ca" -v ib="$ib" -v ia="$ia" 'BEGIN {
    printf "%-14s CPU us/image %6.2f -> %6.2f (%.2fx)   images/s %8.0f -> %8.0f (%.2fx)\n", k, cb, ca, ca / cb, ib, ia, ia / ib }'
done
