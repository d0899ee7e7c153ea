#!/usr/bin/env bash
# Streaming from nginx on loopback against the same file read locally (docs/streaming.md), side by
# side in one run: CIFAR-10 cifar-train with a warm cache; a cold quasi_random epoch of raw 512x512
# samples (bytes fetched per epoch, and the fetch rate against curl downloading the whole file); and
# dsc merge of CIFAR-10's parts against cp of the same bytes.
#   bash bench/run_stream_bench.sh [BUILD_DIR]
set -euo pipefail
source "$(dirname "$0")/common.sh"
dsc=$build/dsc
sw=$work/stream
mkdir -p "$sw/www" "$sw/nginx"
[ -f "$sw/www/cifar.beton" ] || "$dsc" build "$data/train" "$sw/www/cifar.beton" --quiet
if [ ! -f "$sw/www/raw.beton" ]; then
  "$dsc" generate "$sw/gen" --classes 10 --train 400 --test 1 --size 512 >/dev/null
  "$dsc" build "$sw/gen/train" "$sw/www/raw.beton" --encoding raw --quiet
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
served() { awk '{s+=$NF} END {print s+0}' "$sw/nginx/access.log"; }
rate() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['images_per_second'])" "$1"; }

echo "== CIFAR-10 cifar-train: local file, then the URL with a warm cache (3 epochs each, alternating twice)"
rm -rf "$sw/cache"
"$dsc" bench "$url/cifar.beton" --preset cifar-train --cache-dir "$sw/cache" --epochs 1 --json > /dev/null  # warms the cache
for pass in 1 2; do
  "$dsc" bench "$sw/www/cifar.beton" --preset cifar-train --epochs 3 --json > "$sw/local.json"
  "$dsc" bench "$url/cifar.beton" --preset cifar-train --cache-dir "$sw/cache" --epochs 3 --json > "$sw/url.json"
  echo "pass $pass: local $(rate "$sw/local.json") images/s, URL warm $(rate "$sw/url.json") images/s"
done

echo "== cold quasi_random epoch of raw 512x512 samples ($(stat -c %s "$sw/www/raw.beton") bytes), budget 64 MiB"
: > "$sw/nginx/access.log"
start=$(date +%s.%N)
curl -s -o /dev/null "$url/raw.beton"
curl_s=$(python3 -c "import time; print(time.time() - $start)")
echo "curl whole file: $curl_s s"
for pass in 1 2; do
  rm -rf "$sw/cache-raw"
  : > "$sw/nginx/access.log"
  start=$(date +%s.%N)
  "$dsc" bench "$url/raw.beton" --preset cifar-test --dtype uint8 --batch-size 16 --threads 2 --order quasi_random \
    --cache-dir "$sw/cache-raw" --cache-budget 64M --epochs 1 > /dev/null
  dsc_s=$(python3 -c "import time; print(time.time() - $start)")
  echo "pass $pass: dsc cold epoch $dsc_s s (whole process), fetched $(served) bytes = $(python3 -c "print(round($(served)/$(stat -c %s "$sw/www/raw.beton"),4))")x the file"
done

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
