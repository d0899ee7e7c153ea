#!/usr/bin/env bash
# Streaming from nginx on loopback against the same file read locally (docs/streaming.md), side by
# side in one run: CIFAR-10 cifar-train with a warm cache; a cold quasi_random epoch of raw 512x512
# samples (bytes fetched per epoch; the fetch rate against curl downloading the whole file to /dev/null,
# against curl and the local file's epoch run at once, and against curl writing the file to disk); and
# dsc merge of CIFAR-10's parts against cp of the same bytes.
#   bash bench/run_stream_bench.sh [BUILD_DIR]
# Environment: SECTIONS (default "warm cold merge"), TRAIN (images per class of the raw file, default
# 400: 3.0 GiB; 100 gives 750 MiB), BUDGETS (cold epochs' cache budgets, default "512M 64M"), ROUNDS
# (cold rounds per budget, default 3), PIN (CPU list for taskset, default none).
set -euo pipefail
SECTIONS=${SECTIONS:-warm cold merge}
TRAIN=${TRAIN:-400}
BUDGETS=${BUDGETS:-512M 64M}
ROUNDS=${ROUNDS:-3}
pin=()
[ -n "${PIN:-}" ] && pin=(taskset -c "$PIN")
source "$(dirname "$0")/common.sh"
dsc=$build/dsc
sw=$work/stream
mkdir -p "$sw/www" "$sw/nginx"
[ -f "$sw/www/cifar.beton" ] || "$dsc" build "$data/train" "$sw/www/cifar.beton" --quiet
raw=raw-$TRAIN.beton
if [ ! -f "$sw/www/$raw" ]; then
  "$dsc" generate "$sw/gen" --classes 10 --train "$TRAIN" --test 1 --size 512 >/dev/null
  "$dsc" build "$sw/gen/train" "$sw/www/$raw" --encoding raw --quiet
  rm -rf "$sw/gen"
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$sw/nginx/nginx.conf" <<CONF
daemon off; master_process on; worker_processes 2; $( [ "$(id -u)" = 0 ] && echo "user root;" )
pid $sw/nginx/pid; error_log $sw/nginx/error.log warn;
events { worker_connections 256; }
http {
  log_format ranges '\$request_method \$uri \$http_range \$status \$body_bytes_sent';
  access_log $sw/nginx/access.log ranges;
  client_body_temp_path $sw/nginx/cb; proxy_temp_path $sw/nginx/px; fastcgi_temp_path $sw/nginx/fc;
  uwsgi_temp_path $sw/nginx/uw; scgi_temp_path $sw/nginx/sc;
  keepalive_requests 100000; sendfile on; default_type application/octet-stream;
  server { listen 127.0.0.1:$port; root $sw/www; location / { } }
}
CONF
/usr/sbin/nginx -e "$sw/nginx/error.log" -p "$sw/nginx" -c "$sw/nginx/nginx.conf" &
ngx=$!
trap 'kill $ngx 2>/dev/null; wait $ngx 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
url=http://127.0.0.1:$port
served() { awk '{s+=$NF} END {printf "%.0f\n", s}' "$sw/nginx/access.log"; }
rate() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['images_per_second'])" "$1"; }

if [[ " $SECTIONS " == *" warm "* ]]; then
echo "== CIFAR-10 cifar-train: local file, then the URL with a warm cache (3 epochs each, alternating twice)"
rm -rf "$sw/cache"
"$dsc" bench "$url/cifar.beton" --preset cifar-train --cache-dir "$sw/cache" --epochs 1 --json > /dev/null  # warms the cache
for pass in 1 2; do
  "$dsc" bench "$sw/www/cifar.beton" --preset cifar-train --epochs 3 --json > "$sw/local.json"
  "$dsc" bench "$url/cifar.beton" --preset cifar-train --cache-dir "$sw/cache" --epochs 3 --json > "$sw/url.json"
  echo "pass $pass: local $(rate "$sw/local.json") images/s, URL warm $(rate "$sw/url.json") images/s"
done
fi

now() { date +%s.%N; }
secs() { python3 -c "print(round($2 - $1, 3))"; }
if [[ " $SECTIONS " == *" cold "* ]]; then
  size=$(stat -c %s "$sw/www/$raw")
  mb() { python3 -c "print(round($size / ($1) / 1e6))"; }
  echo "== cold quasi_random epoch of raw 512x512 samples ($size bytes): curl, the local file and the URL from an empty cache, alternated"
  for budget in $BUDGETS; do
    epoch=(--preset cifar-test --dtype uint8 --batch-size 16 --threads 2 --order quasi_random --cache-budget "$budget" --epochs 1)
    for round in $(seq "$ROUNDS"); do
      cat "$sw/www/$raw" > /dev/null  # in the page cache for all three: nginx and the local read alike
      : > "$sw/nginx/access.log"
      t0=$(now); curl -s -o /dev/null "$url/$raw"; curl_s=$(secs "$t0" "$(now)")
      # curl keeping what it fetched, in a file beside the cache directory (not synced, as dsc's cache).
      rm -f "$sw/curl-copy"
      t0=$(now); curl -s -o "$sw/curl-copy" "$url/$raw"; curl_file_s=$(secs "$t0" "$(now)")
      rm -f "$sw/curl-copy"
      t0=$(now)
      "${pin[@]}" "$dsc" bench "$sw/www/$raw" "${epoch[@]}" > /dev/null
      local_s=$(secs "$t0" "$(now)")
      # The local epoch drops the blocks it has read past its budget from the page cache
      # (docs/distributed.md): the file goes back in before each part that nginx serves.
      cat "$sw/www/$raw" > /dev/null
      # A client that receives the bytes and runs the same epoch, caching and checking nothing: curl
      # and the local file's epoch at once, on the same cores.
      t0=$(now)
      curl -s -o /dev/null "$url/$raw" &
      "${pin[@]}" "$dsc" bench "$sw/www/$raw" "${epoch[@]}" > /dev/null
      wait $!
      both_s=$(secs "$t0" "$(now)")
      rm -rf "$sw/cache-raw"
      cat "$sw/www/$raw" > /dev/null
      : > "$sw/nginx/access.log"
      t0=$(now)
      "${pin[@]}" "$dsc" bench "$url/$raw" "${epoch[@]}" --cache-dir "$sw/cache-raw" > /dev/null
      dsc_s=$(secs "$t0" "$(now)")
      got=$(served)
      echo "budget $budget round $round: curl $(mb "$curl_s") MB/s, local $(mb "$local_s") MB/s, URL cold $(mb "$dsc_s") MB/s" \
           "= $(python3 -c "print(round($curl_s / $dsc_s, 2))")x curl, fetched $(python3 -c "print(round($got / $size, 4))")x the file ($got bytes);" \
           "curl with the local epoch at once $(mb "$both_s") MB/s = $(python3 -c "print(round($curl_s / $both_s, 2))")x curl;" \
           "curl to a file $(mb "$curl_file_s") MB/s: URL cold = $(python3 -c "print(round($curl_file_s / $dsc_s, 2))")x that"
    done
  done
  rm -rf "$sw/cache-raw"
fi

if [[ " $SECTIONS " == *" merge "* ]]; then
echo "== dsc merge of CIFAR-10's 8 parts against cp of the same bytes"
for i in $(seq 0 7); do [ -f "$sw/part-$i.beton" ] || "$dsc" build "$data/train" "$sw/part-$i.beton" --shard "$i/8" --quiet; done
for pass in 1 2; do
  cat "$sw"/part-*.beton > /dev/null
  start=$(date +%s.%N); cp "$sw/www/cifar.beton" "$sw/copy.beton"; sync "$sw/copy.beton"; cp_s=$(python3 -c "import time; print(time.time() - $start)")
  start=$(date +%s.%N); "$dsc" merge "$sw"/part-*.beton "$sw/merged.beton" > /dev/null; sync "$sw/merged.beton"
  merge_s=$(python3 -c "import time; print(time.time() - $start)")
  cmp "$sw/merged.beton" "$sw/www/cifar.beton" && same=identical || same=DIFFERENT
  echo "pass $pass: cp $cp_s s, merge $merge_s s (merge/cp speed $(python3 -c "print(round($cp_s/$merge_s,2))")x), merged file $same to the one-machine build"
done
rm -f "$sw/copy.beton" "$sw/merged.beton"
fi
