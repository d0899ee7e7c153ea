#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "format/error.h"
#include "writer/source.h"
#include "writer/source_ffcv.h"

namespace dsc::writer {

namespace fs = std::filesystem;

const std::vector<std::string>& Cifar10ClassNames() {
  static const std::vector<std::string> names = {"airplane", "automobile", "bird", "cat", "deer",
                                                 "dog", "frog", "horse", "ship", "truck"};
  return names;
}

void ThrowFileError(const std::string& what, int err) {
  const std::string message = what + ": " + std::strerror(err);
  if (err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOBUFS || err == EAGAIN || err == EIO) throw EnvironmentError(message);
  throw Error(message);
}

std::vector<uint8_t> ReadWholeFile(const std::string& path, uint64_t max_size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;  // before the message's allocations can touch it
    ThrowFileError(path + ": cannot open", e);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  if (uint64_t(st.st_size) > max_size) {
    ::close(fd);
    throw Error(path + ": " + std::to_string(st.st_size) + " bytes, more than --max-file-size " + std::to_string(max_size));
  }
  std::vector<uint8_t> buf(size_t(st.st_size));
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t r = ::read(fd, buf.data() + got, buf.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      int e = errno;
      ::close(fd);
      const std::string where = path + ": read failed at byte " + std::to_string(got);
      if (r < 0) ThrowFileError(where, e);
      throw Error(where + ": file shrank while reading");
    }
    got += size_t(r);
  }
  ::close(fd);
  return buf;
}

std::unique_ptr<Source> OpenSource(const std::string& path, const std::string& format, const std::string& split,
                                   uint64_t max_file_size) {
  if (split != "train" && split != "test") throw OptionError("--split must be 'train' or 'test', not '" + split + "'");
  std::error_code ec;
  if (format == "webdataset" || (format == "auto" && LooksLikeWebDataset(path))) {
    if (split != "train") throw Error(path + ": WebDataset shards have no splits; name the test shards instead");
    return OpenWebDataset(path, max_file_size);
  }
  if (!fs::exists(path, ec)) throw Error(path + ": no such file or directory");
  // An FFCV .beton file, told by its first bytes (never its name): `dsc convert`.
  if (format == "ffcv" || (format == "auto" && fs::is_regular_file(path, ec) && IsFfcvFile(path))) {
    if (split != "train") throw Error(path + ": an FFCV file has no splits");
    return OpenFfcv(path);
  }
  if (format == "manifest" || (format == "auto" && fs::is_regular_file(path, ec))) {
    // A manifest has no splits: a silent whole-file build for --split test would be the training set.
    if (split != "train") throw Error(path + ": a manifest has no splits; --split test needs a CIFAR download or a tree with train/ and test/ folders (list the test files in a manifest of their own)");
    if (format == "auto") {
      std::string name = fs::path(path).filename().string();
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
      for (const char* ext : {".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.xz", ".tar.bz2", ".zip", ".gz", ".zst"})
        if (name.size() > std::strlen(ext) && name.compare(name.size() - std::strlen(ext), std::string::npos, ext) == 0)
          throw Error(path + ": an archive, not a folder or a manifest: extract it (e.g. tar -xf) and pass the folder it holds");
    }
    return OpenManifest(path, max_file_size);
  }
  if (!fs::is_directory(path, ec)) throw Error(path + ": not a directory");
  std::string dir = path;
  // Accept the folder that holds an extracted download as well as the download folder itself.
  for (const char* sub : {"cifar-10-batches-bin", "cifar-100-binary", "cifar-10-batches-py", "cifar-100-python"}) {
    if (format == "auto" && fs::is_directory(fs::path(path) / sub, ec) && !fs::exists(fs::path(path) / "train", ec)) {
      dir = (fs::path(path) / sub).string();
      break;
    }
  }
  auto has = [&](const char* f) { return fs::is_regular_file(fs::path(dir) / f, ec); };
  if (format == "cifar-binary" ||
      (format == "auto" && (has("data_batch_1.bin") || has("test_batch.bin") || has("train.bin") || has("test.bin"))))
    return OpenCifarBinary(dir, split);
  if (format == "cifar-python" ||
      (format == "auto" && (has("data_batch_1") || has("test_batch") || (has("train") && has("meta")))))
    return OpenCifarPython(dir, split);
  if (format == "tree" || format == "auto") return OpenImageTree(dir, split, max_file_size);
  throw Error("unknown --format '" + format + "' (expected auto, cifar-binary, cifar-python, tree, manifest, webdataset)");
}

}  // namespace dsc::writer
