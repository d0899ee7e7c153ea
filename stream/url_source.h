// A dsc file read over HTTP(S) (docs/streaming.md): a format::ByteSource whose bytes come from
// ranged GETs, kept in a local cache directory under a byte budget.
//
// Contract:
//  - Opening fetches the header page, then (unless the cache holds it) everything after the data
//    section: index, meta, block table, optional sections and footer. That copy lives in
//    CACHE_DIR/<url hash>-<header checksum>/, so a file changed on the server (a new header checksum)
//    never meets an old cache.
//  - The data section is fetched in units of one block (its content and its zero padding), written
//    to a temporary file in the cache directory as it arrives and checked against the block table's
//    checksum (and the padding for zeros) before it takes its name and any byte of it is used. A
//    unit read by Read() is fetched on demand; WillNeed (the readahead's plan order) fetches ahead on
//    `connections` connections at once.
//  - The cache directory's block files never exceed `budget` bytes: a new block first evicts what
//    DontNeed released (plan order), then the least recently read of those never hinted (random
//    order), then, for a block a reader waits for only, hinted blocks the plan has not released yet
//    (the furthest ahead first); a prefetch waits for room instead. An evicted file no one else holds
//    is recycled for the next block. The budget must hold two blocks. ReadHeld hands out bytes in
//    place from the block's mapping; the ReadBuffer's hold keeps an evicted block's file (unlinked)
//    until its next read, so the disk may hold one block per such buffer beyond the budget.
//  - Every request after the first carries If-Match with the ETag the header came with: a file
//    replaced on the server is an error naming the URL and the block, never mixed data.
//  - FFCV's .beton files (docs/ffcv-format.md) stream too: the header, descriptors and metadata table
//    are one cached range, the allocation table another, each data page a unit (the padding before
//    the first page is fetched only if read). FFCV has no checksums: the cache directory is keyed by
//    the ETag, size and first page instead, If-Match holds every request to that version, and
//    without an ETag nothing an earlier run cached is used.
//  - Errors (dsc::Error) name the URL (without credentials or query) and the block (FFCV: the page).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "format/byte_source.h"
#include "stream/http.h"

namespace dsc::stream {

struct StreamOptions {
  std::string cache_dir;               // "" = $DSC_CACHE_DIR, else $XDG_CACHE_HOME/dsc, else ~/.cache/dsc
  uint64_t budget = 256ull << 20;      // bytes of blocks kept in the cache directory
  int connections = 4;                 // ranges in flight for prefetching
  HttpOptions http;
  Signer sign;                         // S3: signs each request
  std::string display_name;            // the name in messages ("" = the URL without credentials or query)
};

// Throws dsc::Error naming the URL when it cannot be opened (no answer after the retries, not a
// dsc file, no range support, cache directory unusable).
std::unique_ptr<format::ByteSource> OpenUrlSource(const std::string& url, const StreamOptions& options);

// What a URL source did, for tests and dsc bench (all zero for other sources).
struct StreamCounters {
  uint64_t requests = 0;        // HTTP requests sent, retries included
  uint64_t bytes_fetched = 0;   // body bytes received
  uint64_t blocks_fetched = 0;
  uint64_t blocks_from_cache = 0;  // blocks found in the cache directory from an earlier run
  uint64_t evicted = 0;
  uint64_t recycled = 0;        // evicted block files overwritten by a new block (no new pages)
};
StreamCounters CountersOf(const format::ByteSource& src);

}  // namespace dsc::stream
