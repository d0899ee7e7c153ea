// dsc_compare: one loader configuration per run, for side-by-side measurements driven by
// bench/run_cifar_compare.sh (which alternates runs and pins them to a core).
//   dsc_compare dsc FILE THREADS EPOCHS        the dsc loader, cifar-train preset, no stage timing
//   dsc_compare naive TREE THREADS EPOCHS      the naive ImageFolder-style loader
// Prints the median images/s of the epochs after the first.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/naive_loader.h"
#include "reader/loader.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: dsc_compare dsc|naive PATH THREADS EPOCHS\n");
    return 2;
  }
  const std::string mode = argv[1], path = argv[2];
  const int threads = std::atoi(argv[3]), epochs = std::max(2, std::atoi(argv[4]));
  std::vector<double> rates;
  double checksum = 0;
  if (mode == "dsc") {
    auto o = dsc::LoaderOptions::CifarTrain();
    o.threads = threads;
    dsc::Loader loader(path, o);
    for (int e = 0; e < epochs; ++e) {
      const auto t0 = std::chrono::steady_clock::now();
      uint64_t images = 0;
      for (const dsc::Batch& b : loader.epoch(uint64_t(e))) {
        images += b.size - b.padding_count;
        checksum += b.images_as<float>()[0];
      }
      rates.push_back(images / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  } else if (mode == "naive") {
    dsc::bench::NaiveOptions o;
    o.threads = threads;
    dsc::bench::NaiveLoader loader(path, o);
    for (int e = 0; e < epochs; ++e) {
      const auto t0 = std::chrono::steady_clock::now();
      uint64_t images = loader.RunEpoch(uint64_t(e), &checksum);
      rates.push_back(images / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  rates.erase(rates.begin());
  std::sort(rates.begin(), rates.end());
  std::printf("%.0f\n", rates[rates.size() / 2]);
  std::fprintf(stderr, "(checksum %g)\n", checksum);
  return 0;
}
