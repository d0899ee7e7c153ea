// Loads a dsc file through remote workers only (the installed dsc::remote), and prints the number of
// samples delivered and how many of them the workers decoded. usage: remote_consumer FILE HOST:PORT
#include <cstdio>

#include "reader/loader.h"
#include "remote/client.h"

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  dsc::LoaderOptions o = dsc::LoaderOptions::CifarTrain();
  o.batch_size = 100;
  o.remote.addresses = {argv[2]};
  o.remote.local_threads = 0;
  o.remote.connect = dsc::remote::Connector();
  dsc::Loader loader(argv[1], o);
  unsigned long long n = 0, remote = 0;
  for (const dsc::Batch& b : loader.epoch(0)) n += b.size - b.padding_count;
  for (const auto& w : loader.remote_stats()) remote += w.samples;
  std::printf("%llu %llu\n", n, remote);
  return n == loader.dataset().size() ? 0 : 1;
}
