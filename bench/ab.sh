#!/usr/bin/env bash
# Two dsc builds (or two settings of one) on the same file, alternating round by round, so that both
# see the same minutes of a noisy machine: per run images/s and CPU us per image (dsc bench --json),
# then the medians and the median (range) of the rounds' B / A ratios.
#
# usage: bench/ab.sh [OPTIONS] A B [ROUNDS] -- DSC_BENCH_ARGS...
#   A, B      a dsc binary, or a command that runs one, quoted ("env NAME=1 build/dsc",
#             "chrt -b 0 build/dsc"): each run is `A bench DSC_BENCH_ARGS --json`. ROUNDS: 5.
#   --pin CPUS          run the bench runs under taskset -c CPUS
#   --a-flags "FLAGS"   extra dsc bench flags for A's runs only (likewise --b-flags)
#   --serve DSC         remote clients: one `DSC serve FILE --threads 1` on core 1 per round (FILE: the
#                       first bench argument), and each run gets --remote ADDR
#   --serve-sides DSC   remote workers: A and B are the workers' binaries, one started per run, and DSC
#                       the client; adds the worker's CPU us per image (from /proc over the run)
#   --perf              each run under `perf record -F 4999 -D 1500`: samples in all, per library
#                       group (grpc, kernel, libc, dsc), and per symbol matching SYMS=REGEX when set
# examples:
#   bench/ab.sh --pin 1 OLD/dsc build/dsc 5 -- jpg.beton --threads 1 --epochs 4
#   bench/ab.sh --pin 0 --serve build/dsc OLD/dsc build/dsc 6 -- cifar.beton --preset cifar-train \
#       --dtype float32 --epochs 4 --local-threads 0
#   bench/ab.sh --pin 0 --serve build/dsc --b-flags --data-path=false build/dsc build/dsc 4 -- cifar.beton ...
set -euo pipefail
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
pin=() aflags="" bflags="" serve="" sides="" perf=0
while [ $# -gt 0 ]; do
  case $1 in
    --pin) pin=(taskset -c "$2"); shift 2 ;;
    --a-flags) aflags=$2; shift 2 ;;
    --b-flags) bflags=$2; shift 2 ;;
    --serve) serve=$2; shift 2 ;;
    --serve-sides) sides=$2; shift 2 ;;
    --perf) perf=1; shift ;;
    -h|--help) usage 0 ;;
    --*) echo "ab.sh: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -ge 3 ] || usage
A=$1 B=$2
shift 2
rounds=5
if [ "$1" != -- ]; then rounds=$1; shift; fi
[ "${1:-}" = -- ] || usage
shift
args=("$@")
[ ${#args[@]} -gt 0 ] || usage
file=${args[0]}
[ -n "$serve" ] && [ -n "$sides" ] && { echo "ab.sh: --serve and --serve-sides exclude each other" >&2; exit 2; }
[ "$perf" = 0 ] || command -v perf > /dev/null || { echo "ab.sh: --perf needs perf (linux-perf)" >&2; exit 2; }
py=/usr/bin/python3
tmp=$(mktemp -d)
pid=""
stop() { [ -n "$pid" ] && { kill "$pid" 2> /dev/null; wait "$pid" 2> /dev/null || true; }; pid=""; }
trap 'stop; rm -rf "$tmp"' EXIT
start() {  # a worker: `$1 serve FILE --threads 1` on core 1; sets pid and addr
  local -a cmd
  read -r -a cmd <<< "$1"
  taskset -c 1 "${cmd[@]}" serve "$file" --threads 1 > "$tmp/serve.out" 2>&1 &
  pid=$!
  for _ in $(seq 100); do grep -q listening "$tmp/serve.out" 2> /dev/null && break; sleep 0.1; done
  addr=$(sed -n 's/listening on //p' "$tmp/serve.out")
  [ -n "$addr" ] || { echo "ab.sh: the worker did not start:" >&2; cat "$tmp/serve.out" >&2; exit 1; }
}
wcpu() { awk -v t="$(getconf CLK_TCK)" '{print ($14 + $15) / t}' "/proc/$pid/stat"; }
run() {  # side round: one bench run, one line of "name value" pairs into $tmp/runs
  local side=$1 r=$2 client flags
  local -a cmd fl prefix=() remote=()
  if [ -n "$sides" ]; then client=$sides; start "${!side}"; else client=${!side}; fi
  [ "$side" = A ] && flags=$aflags || flags=$bflags
  read -r -a cmd <<< "$client"
  read -r -a fl <<< "$flags"
  [ -n "$serve$sides" ] && remote=(--remote "$addr")
  [ "$perf" = 1 ] && prefix=(perf record -q -F 4999 -D 1500 -o "$tmp/perf.data")
  local w0=0
  [ -n "$sides" ] && w0=$(wcpu)
  if ! "${pin[@]}" "${prefix[@]}" "${cmd[@]}" bench "${args[@]}" "${fl[@]}" "${remote[@]}" --json > "$tmp/out.json" 2> "$tmp/err"; then
    echo "ab.sh: $side (${!side}) failed:" >&2; tail -5 "$tmp/err" >&2; exit 1
  fi
  local extra=""
  if [ -n "$sides" ]; then
    extra="worker_cpu_us_per_image $("$py" -c "
import json, sys
n = sum(w['samples'] for w in json.load(open('$tmp/out.json'))['remote'])
print(($(wcpu) - $w0) * 1e6 / n)")"
    stop
  fi
  if [ "$perf" = 1 ]; then
    extra+=" $(perf report -i "$tmp/perf.data" --stdio --no-children -g none --sort dso -F sample,dso 2> /dev/null |
      awk '$1 ~ /^[0-9]+$/ {t += $1}
           /libgrpc|libgpr|libabsl|libprotobuf/ {g += $1} /kernel/ {k += $1} /libc\.so/ {c += $1} $2 ~ /^dsc/ {d += $1}
           END {printf "samples %d grpc %d kernel %d libc %d dsc %d", t, g, k, c, d}')"
    if [ -n "${SYMS:-}" ]; then
      extra+=$(perf report -i "$tmp/perf.data" --stdio --no-children -g none --sort sym -F sample,sym 2> /dev/null |
        awk -v re="$SYMS" '$1 ~ /^[0-9]+$/ && $0 ~ re {n = $NF; sub(/.*::/, "", n); gsub(/[^A-Za-z0-9_]/, "", n); printf " %s %d", n, $1}')
    fi
  fi
  "$py" -c "
import json
d = json.load(open('$tmp/out.json'))
print('$r $side images_per_second', d['images_per_second'], 'cpu_us_per_image', d['cpu_us_per_image'], '$extra')" | tee -a "$tmp/runs"
}
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "A: $A $aflags"
echo "B: $B $bflags"
for r in $(seq "$rounds"); do
  [ -n "$serve" ] && start "$serve"
  order="A B"
  [ $((r % 2)) = 0 ] && order="B A"
  for side in $order; do run "$side" "$r"; done
  stop
done
"$py" - "$tmp/runs" "$rounds" <<'EOF'
import collections, statistics as st, sys
runs = collections.defaultdict(dict)  # side -> round -> {name: value}
for line in open(sys.argv[1]):
    f = line.split()
    runs[f[1]][f[0]] = {f[i]: float(f[i + 1]) for i in range(2, len(f) - 1, 2)}
rounds = [r for r in runs['A'] if r in runs['B']]
names = list(dict.fromkeys(n for s in 'AB' for r in rounds for n in runs[s][r]))
print(f"\n{len(rounds)} rounds; {'':26s} {'A median':>12s} {'B median':>12s}  B/A pairs: median (range)")
for n in names:
    pairs = [(runs['A'][r].get(n, 0), runs['B'][r].get(n, 0)) for r in rounds]
    ratios = [b / a for a, b in pairs if a > 0]
    rs = f"{st.median(ratios):.3f}x ({min(ratios):.3f}-{max(ratios):.3f})" if ratios else "-"
    print(f"{n[:37]:37s} {st.median(a for a, _ in pairs):12.2f} {st.median(b for _, b in pairs):12.2f}  {rs}")
EOF
