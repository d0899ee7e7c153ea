// Loads a dsc file through the installed package and prints the number of samples delivered.
#include <cstdio>

#include "reader/gpu.h"
#include "reader/loader.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  dsc::LoaderOptions o = dsc::LoaderOptions::CifarTrain();
  o.batch_size = 100;
  dsc::Loader loader(argv[1], o);
  unsigned long long n = 0;
  for (const dsc::Batch& b : loader.epoch(0)) n += b.size - b.padding_count;
  std::printf("%llu\n", n);
  std::fprintf(stderr, "dsc::gpu built with CUDA: %d\n", int(dsc::gpu::BuiltWithCuda()));
  return n == loader.dataset().size() ? 0 : 1;
}
