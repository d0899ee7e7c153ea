// dsc merge against copying the same bytes, in one process, side by side: each round copies the parts
// into one file (read, write, fsync, as cp + sync) and merges them (writer::Merge, which also fsyncs),
// alternating; prints medians and the ratio of rates. Usage: merge_bench OUT_DIR PART...
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "writer/merge.h"

namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

uint64_t Copy(const std::vector<std::string>& parts, const std::string& out) {
  std::vector<char> buf(1 << 20);
  const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  uint64_t total = 0;
  for (const auto& p : parts) {
    const int i = ::open(p.c_str(), O_RDONLY);
    for (ssize_t n; (n = ::read(i, buf.data(), buf.size())) > 0; total += uint64_t(n))
      if (::write(o, buf.data(), size_t(n)) != n) std::perror("write");
    ::close(i);
  }
  ::fsync(o);
  ::close(o);
  return total;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: merge_bench OUT_DIR PART...\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::vector<std::string> parts(argv + 2, argv + argc);
  std::vector<double> cp, mg;
  uint64_t bytes = 0;
  for (int r = 0; r < 9; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    bytes = Copy(parts, dir + "/copy.out");
    cp.push_back(Seconds(t0));
    t0 = std::chrono::steady_clock::now();
    dsc::writer::Merge(parts, dir + "/merged.beton");
    mg.push_back(Seconds(t0));
  }
  const double c = Median(cp), m = Median(mg);
  std::printf("%llu bytes in %zu parts: copy %.1f ms (%.0f MB/s), merge %.1f ms (%.0f MB/s), merge/copy rate %.2fx "
              "(medians of 9, in-process)\n",
              (unsigned long long)bytes, parts.size(), c * 1e3, bytes / c / 1e6, m * 1e3, bytes / m / 1e6, c / m);
}
