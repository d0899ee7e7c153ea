#include "tools/train/checkpoint.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <sstream>

#include "format/error.h"
#include "tools/train/profile.h"
#include "writer/atomic_file.h"

namespace dsc::train {

namespace {

namespace fs = std::filesystem;

constexpr const char* kCheckpointMagic = "dsc-train-checkpoint";
constexpr int kCheckpointVersion = 3;
constexpr const char* kFiles[] = {"model.pt", "optimizer.pt", "state.txt", "loader.state"};

void WriteFile(const fs::path& path, const std::string& bytes) {
  writer::AtomicFile f(path.string());
  f.WriteAt(0, bytes.data(), bytes.size());
  f.Commit();
}

std::string StateText(const Checkpoint& k) {
  std::ostringstream st;
  st.precision(17);
  st << kCheckpointMagic << " " << kCheckpointVersion << "\n"
     << "seed " << k.seed << "\nstep " << k.step
     << "\nbatch_size " << k.batch << "\nlimit " << k.limit << "\nepochs " << k.epochs << "\nlr " << k.lr << "\ntrain_samples "
     << k.train_samples << "\nsubset " << k.subset.size();
  for (uint32_t i : k.subset) st << " " << i;
  st << "\nend\n";
  return st.str();
}

template <typename T>
std::string TorchBytes(const T& value) {
  std::ostringstream out;
  torch::save(value, out);
  return out.str();
}

Checkpoint ReadState(const fs::path& path) {
  std::ifstream st(path);
  if (!st) {
    const int e = errno;
    throw Error(path.string() + ": cannot open the checkpoint's state: " + std::strerror(e));
  }
  std::string magic;
  int version = 0;
  if (!(st >> magic >> version) || magic != kCheckpointMagic || version != kCheckpointVersion)
    throw Error(path.string() + ": not a dsc-train checkpoint of format " + std::to_string(kCheckpointVersion) +
                " (written by an older dsc?)");
  Checkpoint k;
  std::string key;
  auto expect = [&](const char* want) {
    if (!(st >> key) || key != want) throw Error(path.string() + ": expected \"" + want + "\", found \"" + key + "\"");
  };
  auto field = [&](const char* want, auto& value) {
    expect(want);
    if (!(st >> value)) throw Error(path.string() + ": unreadable value of " + want);
  };
  uint64_t n = 0;
  field("seed", k.seed);
  field("step", k.step);
  field("batch_size", k.batch);
  field("limit", k.limit);
  field("epochs", k.epochs);
  field("lr", k.lr);
  field("train_samples", k.train_samples);
  field("subset", n);
  if (k.batch == 0 || k.epochs == 0 || k.epochs > uint64_t(kMaxEpochs) || n > k.train_samples)
    throw Error(path.string() + ": inconsistent state (batch size, epochs or subset size)");
  // Grown entry by entry: a corrupt count cannot make a huge allocation ahead of the data.
  for (uint64_t j = 0; j < n; ++j) {
    uint32_t i = 0;
    if (!(st >> i) || i >= k.train_samples) throw Error(path.string() + ": bad subset entry " + std::to_string(j));
    k.subset.push_back(i);
  }
  expect("end");
  // The loader's position and run identity, in the format every dsc state consumer shares.
  const fs::path lpath = path.parent_path() / "loader.state";
  std::ifstream ls(lpath, std::ios::binary);
  if (!ls) {
    const int e = errno;
    throw Error(lpath.string() + ": cannot open the checkpoint's loader state: " + std::strerror(e));
  }
  const std::string bytes((std::istreambuf_iterator<char>(ls)), std::istreambuf_iterator<char>());
  try {
    k.loader = LoaderState::Deserialize(bytes);
  } catch (const Error& e) {
    throw Error(lpath.string() + ": " + e.what());
  }
  if (k.loader.run.seed != k.seed) throw Error(lpath.string() + ": loader seed disagrees with state.txt");
  return k;
}

// The checkpoint's directory split into its parent and name (a trailing slash is allowed).
std::pair<fs::path, std::string> SplitDir(const std::string& dir) {
  fs::path p = fs::absolute(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return {p.parent_path(), p.filename().string()};
}

// The directory's entries made durable (the swap and the removal of the old checkpoint).
void FsyncDir(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw Error(p.string() + ": fsync failed: " + why);
  }
  ::close(fd);
}

// Hidden siblings of the checkpoint directory: ".NAME.dsc-tmp-*" (all left by a crash, given one
// trainer per checkpoint).
void RemoveCheckpointLeftovers(const fs::path& parent, const std::string& name) {
  const std::string prefix = "." + name + ".dsc-tmp-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) fs::remove_all(e.path(), ec);
}

// Puts the complete directory `tmp` in the place of `target`, atomically: swapped with the old
// checkpoint (then deleted), or renamed onto nothing for the first one.
void SwapIn(const fs::path& tmp, const fs::path& target) {
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(tmp);  // the old checkpoint, swapped out
  } else if (errno == ENOENT) {  // the first checkpoint
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) != 0) {
      const int e = errno;
      throw Error(target.string() + ": cannot move the checkpoint into place: " + std::strerror(e));
    }
  } else {
    const std::string why = std::strerror(errno);
    fs::remove_all(tmp);
    throw Error(target.string() + ": cannot swap the new checkpoint in (" + why +
                "; the file system needs renameat2 RENAME_EXCHANGE); the previous checkpoint is kept");
  }
}

}  // namespace

Checkpoint EpochCheckpoint(const Config& c, LoaderState s, uint64_t epoch, bool stopped, uint64_t batches_per_epoch,
                           uint64_t step, uint64_t train_samples, const std::vector<uint32_t>& subset) {
  if (!stopped || s.next_batch >= batches_per_epoch) {  // the epoch is complete: resume at the next one
    s.epoch = epoch + 1;
    s.next_batch = 0;
    s.excluded.clear();  // nothing of the next epoch is consumed yet
    std::fill(s.consumed.begin(), s.consumed.end(), uint8_t(0));
  }
  Checkpoint k;
  k.loader = std::move(s);
  k.seed = c.seed;
  k.step = step;
  k.train_samples = train_samples;
  k.limit = c.limit;
  k.epochs = uint64_t(c.epochs);
  k.batch = c.batch;
  k.lr = c.lr;
  k.subset = subset;
  return k;
}

void CheckCheckpointTarget(const std::string& path) {
  const fs::path p = fs::absolute(path).lexically_normal();
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(p, ec);
  if (ec || st.type() == fs::file_type::not_found) {
    CheckWritable(path, "--checkpoint", /*parents_made=*/true);  // its folder can be made and written
    return;
  }
  const std::string refuse = path + ": exists and is not a dsc train checkpoint, so --checkpoint will not replace it";
  if (st.type() != fs::file_type::directory) throw Error(refuse + " (not a directory)");
  static const std::set<std::string> ours(std::begin(kFiles), std::end(kFiles));
  for (const auto& e : fs::directory_iterator(p, ec))
    if (!ours.count(e.path().filename().string()) || !e.is_regular_file())
      throw Error(refuse + " (it holds " + e.path().filename().string() + ")");
  if (ec) throw Error(path + ": cannot list it: " + ec.message());
  std::ifstream in(p / "state.txt");
  std::string magic;
  if (!(in >> magic) || magic != kCheckpointMagic) throw Error(refuse + " (no " + kCheckpointMagic + " state.txt)");
}

void SaveCheckpoint(const std::string& dir, const Checkpoint& k, ResNet9& model, torch::optim::SGD& opt) {
  CheckCheckpointTarget(dir);
  const auto [parent, name] = SplitDir(dir);
  if (name.empty() || name == "." || name == "..") throw Error(dir + ": not a directory name --checkpoint can replace");
  fs::create_directories(parent);
  RemoveCheckpointLeftovers(parent, name);
  char suffix[17];
  std::snprintf(suffix, sizeof suffix, "%016llx", (unsigned long long)((uint64_t(std::random_device{}()) << 32) ^ std::random_device{}()));
  const fs::path tmp = parent / ("." + name + ".dsc-tmp-" + suffix), target = parent / name;
  fs::create_directory(tmp);
  // Each file durable in the staging directory before the swap makes them the checkpoint.
  WriteFile(tmp / "model.pt", TorchBytes(model));
  WriteFile(tmp / "optimizer.pt", TorchBytes(opt));
  WriteFile(tmp / "state.txt", StateText(k));
  WriteFile(tmp / "loader.state", k.loader.Serialize());
  SwapIn(tmp, target);
  FsyncDir(parent);
}

Checkpoint LoadCheckpointState(Config* c) {
  const fs::path dir = c->resume;
  if (!fs::is_directory(dir)) throw Error(c->resume + ": no checkpoint directory to resume from");
  Checkpoint k = ReadState(dir / "state.txt");
  auto check = [&](const char* flag, const std::string& given, const std::string& stored) {
    if (c->given.count(flag) && given != stored)
      throw OptionError(std::string("--") + flag + " " + given + " contradicts the checkpoint's " + stored + " (" + c->resume +
                  "); resume takes it from the checkpoint, so leave the flag out");
  };
  check("limit", std::to_string(c->limit), std::to_string(k.limit));
  check("batch-size", std::to_string(c->batch), std::to_string(k.batch));
  check("seed", std::to_string(c->seed), std::to_string(k.seed));
  check("epochs", std::to_string(c->epochs), std::to_string(k.epochs));
  check("lr", Shortest(c->lr), Shortest(k.lr));
  c->limit = k.limit;
  c->batch = k.batch;
  c->seed = k.seed;
  c->epochs = int(k.epochs);
  c->lr = k.lr;
  return k;
}

ResumePoint Resume(const Config& c, const Checkpoint& k, int64_t classes, ResNet9& model, torch::optim::SGD& opt, Loader& train,
                   uint64_t batches_per_epoch) {
  const fs::path dir = c.resume;
  // torch::load takes a stored tensor of another shape as it is, so the shapes are compared too.
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& p : model->named_parameters()) shapes.push_back(p.value().sizes().vec());
  for (const char* f : {"model.pt", "optimizer.pt"}) {
    const std::string misfit = (dir / f).string() + ": does not fit a ResNet-9 of " + std::to_string(classes) + " outputs";
    try {
      if (f[0] == 'm') torch::load(model, (dir / f).string());
      else torch::load(opt, (dir / f).string());
    } catch (const c10::Error& e) {
      const std::string what = e.what_without_backtrace();
      throw Error(misfit + " (" + what.substr(0, what.find('\n')) + ")");
    }
    size_t i = 0;
    for (const auto& p : model->named_parameters())
      if (p.value().sizes().vec() != shapes[i++]) throw Error(misfit + " (its " + p.key() + " has another shape)");
  }
  const LoaderState& s = k.loader;
  ResumePoint r;
  r.step = k.step;
  train.restore(s);
  r.epoch = s.epoch;
  r.batch = s.next_batch;
  if (r.batch >= batches_per_epoch) r.epoch += 1, r.batch = 0;  // stopped at an epoch's end (older checkpoints)
  std::printf("resumed from %s at epoch %llu, batch %llu (step %llu)\n", c.resume.c_str(), (unsigned long long)s.epoch,
              (unsigned long long)s.next_batch, (unsigned long long)r.step);
  return r;
}

}  // namespace dsc::train
