// Sources whose samples are image files: a class-per-folder tree, or a manifest of `path<TAB>label`.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "format/error.h"
#include "format/meta.h"
#include "writer/source.h"

namespace dsc::writer {

namespace fs = std::filesystem;

namespace {

bool IsImageName(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

struct FileSample {
  std::string path;
  int32_t label;
  uint64_t size;  // at listing time: a file that changes during the build is an error, not a silent mix
  dev_t dev;
  ino_t ino;
};

// A listed file, its size refused past `max` before anything is read.
FileSample Listed(const fs::path& p, int32_t label, uint64_t max) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) {
    const int e = errno;
    throw Error(p.string() + ": cannot read: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) throw Error(p.string() + ": not a regular file");
  const uint64_t n = uint64_t(st.st_size);
  if (n > max) throw Error(p.string() + ": " + std::to_string(n) + " bytes, more than --max-file-size " + std::to_string(max));
  return {p.string(), label, n, st.st_dev, st.st_ino};
}

bool IsHidden(const fs::path& p) { return !p.filename().empty() && p.filename().string()[0] == '.'; }

// What a listed entry is, following symlinks. An entry that cannot be followed (a dangling link, a
// link loop, no permission) is an error naming it: skipping it would leave out what the user gave.
fs::file_status Status(const fs::path& p) {
  std::error_code ec, ec2;
  const fs::file_status st = fs::status(p, ec);
  if (ec) {
    const bool link = fs::is_symlink(fs::symlink_status(p, ec2));
    throw Error(p.string() + ": cannot read" + (link ? " (a symlink whose target is missing or loops)" : "") + ": " + ec.message());
  }
  return st;
}

class FileList : public Source {
 public:
  FileList(std::string format, std::vector<LabelField> fields, std::vector<FileSample> samples,
           std::vector<std::string> ignored, uint64_t max_file_size)
      : format_(std::move(format)), fields_(std::move(fields)), samples_(std::move(samples)), ignored_(std::move(ignored)),
        max_file_size_(max_file_size) {}

  std::string format() const override { return format_; }
  const std::vector<LabelField>& label_fields() const override { return fields_; }
  size_t size() const override { return samples_.size(); }
  std::vector<std::string> ignored() const override { return ignored_; }
  std::vector<std::string> notes() const override { return notes_; }
  void set_notes(std::vector<std::string> notes) { notes_ = std::move(notes); }
  std::string SampleFileAt(const std::string& path) const override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return "";
    for (const auto& s : samples_)
      if (s.dev == st.st_dev && s.ino == st.st_ino) return s.path;
    return "";
  }

  void Load(size_t i, SourceItem* out) const override {
    out->where = samples_[i].path;
    out->is_pixels = false;
    out->bytes = ReadWholeFile(samples_[i].path, max_file_size_);
    if (out->bytes.size() != samples_[i].size)
      throw Error(samples_[i].path + ": changed during the build (" + std::to_string(samples_[i].size) + " bytes when listed, " +
                  std::to_string(out->bytes.size()) + " when read)");
    out->label[0] = samples_[i].label;
    out->label[1] = 0;
  }

 private:
  std::string format_;
  std::vector<LabelField> fields_;
  std::vector<FileSample> samples_;
  std::vector<std::string> ignored_;
  std::vector<std::string> notes_;
  uint64_t max_file_size_;
};

// Appends every file under `dir` (recursively, skipping dot-entries) to *out. Symlinked folders are
// followed, so a link back to a folder being walked (`open`: device and inode of each) would never end:
// that is an error naming the link rather than a silent skip, since the user meant something by it.
void Walk(const fs::path& dir, std::vector<std::pair<dev_t, ino_t>>* open, std::vector<fs::path>* out,
          std::vector<std::string>* ignored) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    const int e = errno;
    throw Error(dir.string() + ": cannot list: " + std::strerror(e));
  }
  for (const auto& [dev, ino] : *open)
    if (dev == st.st_dev && ino == st.st_ino)
      throw Error(dir.string() + ": symlink loop (it leads back to a folder that contains it); remove or replace the link");
  open->emplace_back(st.st_dev, st.st_ino);
  std::error_code ec;
  std::vector<fs::path> subdirs;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (IsHidden(it->path())) {
      ignored->push_back(it->path().string() + " (hidden)");
      continue;
    }
    const fs::file_status st = Status(it->path());
    if (fs::is_directory(st)) subdirs.push_back(it->path());
    else if (fs::is_regular_file(st)) out->push_back(it->path());
    else if (IsImageName(it->path())) throw Error(it->path().string() + ": not a regular file (a FIFO, socket or device); remove it or replace it with the image");
    else ignored->push_back(it->path().string() + " (not a regular file)");
  }
  if (ec) throw Error(dir.string() + ": cannot list: " + ec.message());
  std::sort(subdirs.begin(), subdirs.end());
  for (const auto& d : subdirs) Walk(d, open, out, ignored);
  open->pop_back();
}

// Every file of a class folder, sorted by path so the order is stable.
std::vector<fs::path> SortedFiles(const fs::path& root, const fs::path& dir, std::vector<std::string>* ignored) {
  std::vector<std::pair<dev_t, ino_t>> open;
  struct stat st;
  if (::stat(root.c_str(), &st) == 0) open.emplace_back(st.st_dev, st.st_ino);
  std::vector<fs::path> out;
  Walk(dir, &open, &out, ignored);
  std::sort(out.begin(), out.end());
  return out;
}

// The class folders of `root` (appended to `classes`); other entries go to `ignored` when it is given.
void ListClasses(const fs::path& root, std::vector<std::string>* classes, std::vector<std::string>* ignored) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    if (IsHidden(p)) {
      if (ignored) ignored->push_back(p.string() + " (hidden)");
    } else if (fs::is_directory(Status(p))) {
      const std::string name = p.filename().string();
      // Class names are meta strings, which the format keeps UTF-8 (dsc info --json prints them).
      if (!format::IsUtf8(name)) throw Error(p.string() + ": the class folder's name is not UTF-8; rename it");
      classes->push_back(name);
    } else if (ignored) {
      ignored->push_back(p.string() + " (not in a class folder)");
    }
  }
  if (ec) throw Error(root.string() + ": cannot list: " + ec.message());
}

}  // namespace

std::unique_ptr<Source> OpenImageTree(const std::string& dir, const std::string& split, uint64_t max_file_size) {
  std::error_code ec;
  fs::path root = dir;
  const bool split_layout = fs::is_directory(root / "train", ec) || fs::is_directory(root / "test", ec);
  if (split_layout) {
    root /= split;
    if (!fs::is_directory(root, ec)) throw Error(dir + ": has split folders but no '" + split + "' folder");
  } else if (split != "train") {  // the whole tree is the training set: a test file built from it would be too
    throw Error(dir + ": no train/ and test/ folders, so --split " + split + " has nothing to select (the whole tree is the train split)");
  }
  std::vector<std::string> classes, ignored;
  ListClasses(root, &classes, &ignored);
  if (split_layout) {
    // Labels are indices into the sorted class list: train.beton and test.beton must number the classes
    // alike even when one split lacks a class, so the list is every split's classes together.
    for (const char* other : {"train", "test"}) {
      if (other == split || !fs::is_directory(fs::path(dir) / other, ec)) continue;
      ListClasses(fs::path(dir) / other, &classes, nullptr);
    }
  }
  std::sort(classes.begin(), classes.end());
  classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
  if (classes.empty()) throw Error(root.string() + ": no class folders (expected ROOT/<class>/*.jpg)");
  std::vector<FileSample> samples;
  std::vector<std::string> notes;
  for (size_t c = 0; c < classes.size(); ++c) {
    const size_t before = samples.size();
    const fs::path folder = root / classes[c];
    if (!fs::is_directory(folder, ec)) {
      notes.push_back("class '" + classes[c] + "' (label " + std::to_string(c) + ") has no folder in " + root.string() +
                      " (only the other split has it): no samples, its label kept so the splits' labels agree");
      continue;
    }
    for (const auto& f : SortedFiles(root, folder, &ignored)) {
      if (IsImageName(f)) samples.push_back(Listed(f, int32_t(c), max_file_size));
      else ignored.push_back(f.string() + " (not .jpg/.jpeg/.png)");
    }
    if (samples.size() == before)
      notes.push_back("class '" + classes[c] + "' (label " + std::to_string(c) + "): " + folder.string() + " has no images");
  }
  std::sort(ignored.begin(), ignored.end());
  if (samples.empty()) throw Error(root.string() + ": no .jpg/.jpeg/.png files in the class folders");
  auto list = std::make_unique<FileList>("tree", std::vector<LabelField>{{"label", classes}}, std::move(samples), std::move(ignored),
                                         max_file_size);
  list->set_notes(std::move(notes));
  return list;
}

std::unique_ptr<Source> OpenManifest(const std::string& file, uint64_t max_file_size) {
  std::ifstream in(file);
  if (!in) throw Error(file + ": cannot open manifest");
  const fs::path base = fs::path(file).parent_path();
  std::vector<FileSample> samples;
  // Lines are bounded: a file that is not a manifest (one without newlines, /dev/zero) must not be
  // read into memory whole.
  constexpr size_t kMaxLine = 64 << 10;
  std::vector<char> buf(kMaxLine + 1);
  for (size_t n = 1;; ++n) {
    in.getline(buf.data(), std::streamsize(buf.size()));
    if (in.bad()) throw Error(file + ":" + std::to_string(n) + ": read error");
    if (in.fail() && !in.eof()) throw Error(file + ":" + std::to_string(n) + ": a line longer than " + std::to_string(kMaxLine) + " bytes (not a manifest?)");
    if (in.eof() && in.gcount() == 0) break;
    std::string line(buf.data(), size_t(in.gcount()) - (in.eof() ? 0 : 1));  // without the newline
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    size_t tab = line.rfind('\t');
    if (tab == std::string::npos || tab == 0 || tab + 1 == line.size())
      throw Error(file + ":" + std::to_string(n) + ": expected 'path<TAB>label'");
    const std::string label = line.substr(tab + 1);
    char* end = nullptr;
    long v = std::strtol(label.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v > INT32_MAX)
      throw Error(file + ":" + std::to_string(n) + ": label '" + label + "' is not a non-negative integer");
    fs::path p = line.substr(0, tab);
    if (p.is_relative()) p = base / p;
    samples.push_back(Listed(p, int32_t(v), max_file_size));
  }
  if (samples.empty()) throw Error(file + ": the manifest lists no samples");
  return std::make_unique<FileList>("manifest", std::vector<LabelField>{{"label", {}}}, std::move(samples),
                                    std::vector<std::string>{}, max_file_size);
}

}  // namespace dsc::writer
