#include "tests/cifar_fixtures.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "tests/pickle_writer.h"
#include "tests/test_util.h"
#include "writer/source.h"

namespace dsc::test {

namespace fs = std::filesystem;

CifarSet LoadCifar(int n, const std::string& split, bool hundred) {
  const auto& names = writer::Cifar10ClassNames();
  CifarSet s;
  for (int k = 0; k < n; ++k) {
    int cls = k % 10, idx = k / 10;
    char file[16];
    std::snprintf(file, sizeof file, "%04d.jpg", idx);
    auto jpeg = ReadFile(CifarJpegRoot() + "/" + split + "/" + names[size_t(cls)] + "/" + file);
    int w, h;
    s.hwc.push_back(ReferenceDecode(jpeg, &w, &h));
    if (w != 32 || h != 32) throw std::runtime_error("unexpected CIFAR image size");
    if (hundred) {
      s.fine.push_back(10 * cls + idx % 10);
      s.coarse.push_back((10 * cls + idx % 10) / 5);
    } else {
      s.fine.push_back(cls);
    }
  }
  return s;
}

std::vector<uint8_t> ToPlanar(const std::vector<uint8_t>& hwc) {
  std::vector<uint8_t> p(3072);
  for (size_t i = 0; i < 1024; ++i)
    for (size_t c = 0; c < 3; ++c) p[c * 1024 + i] = hwc[i * 3 + c];
  return p;
}

namespace {

std::vector<uint8_t> BinaryRecords(const CifarSet& s, size_t from, size_t to, bool hundred) {
  std::vector<uint8_t> out;
  for (size_t i = from; i < to; ++i) {
    if (hundred) out.push_back(uint8_t(s.coarse[i]));
    out.push_back(uint8_t(s.fine[i]));
    auto p = ToPlanar(s.hwc[i]);
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

std::string Py2Batch(const CifarSet& s, size_t from, size_t to, bool hundred, const std::string& label) {
  Py2Pickler p;
  std::vector<uint8_t> planar;
  std::vector<int> fine(s.fine.begin() + long(from), s.fine.begin() + long(to));
  std::vector<std::string> names;
  for (size_t i = from; i < to; ++i) {
    auto q = ToPlanar(s.hwc[i]);
    planar.insert(planar.end(), q.begin(), q.end());
    names.push_back("image_" + std::to_string(i) + ".png");
  }
  p.BeginDict(hundred ? 5 : 4);
  p.Str("data");
  p.U8Array(planar.data(), int64_t(to - from), 3072);
  p.Str(hundred ? "fine_labels" : "labels");
  p.IntList(fine);
  if (hundred) {
    p.Str("coarse_labels");
    p.IntList(std::vector<int>(s.coarse.begin() + long(from), s.coarse.begin() + long(to)));
  }
  p.Str("batch_label");
  p.Str(label);
  p.Str("filenames");
  p.StrList(names);
  p.EndDict();
  return p.Finish();
}

std::string Py2Names(const std::vector<std::pair<std::string, std::vector<std::string>>>& lists) {
  Py2Pickler p;
  p.BeginDict(lists.size());
  for (const auto& [key, names] : lists) {
    p.Str(key);
    p.StrList(names);
  }
  p.EndDict();
  return p.Finish();
}

std::vector<std::string> Numbered(const std::string& prefix, int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(prefix + std::to_string(i));
  return v;
}

void Write(const fs::path& p, const std::string& s) { WriteFile(p.string(), s.data(), s.size()); }

}  // namespace

std::string WriteCifar10Binary(const std::string& dir, const CifarSet& train, int batches, const CifarSet& test) {
  fs::path root = fs::path(dir) / "cifar-10-batches-bin";
  fs::create_directories(root);
  size_t per = (train.size() + size_t(batches) - 1) / size_t(batches);
  for (int b = 0; b < batches; ++b) {
    size_t from = std::min(train.size(), size_t(b) * per), to = std::min(train.size(), from + per);
    WriteFile((root / ("data_batch_" + std::to_string(b + 1) + ".bin")).string(), BinaryRecords(train, from, to, false));
  }
  WriteFile((root / "test_batch.bin").string(), BinaryRecords(test, 0, test.size(), false));
  std::string meta;
  for (const auto& n : writer::Cifar10ClassNames()) meta += n + "\n";
  Write(root / "batches.meta.txt", meta + "\n");
  return root.string();
}

std::string WriteCifar100Binary(const std::string& dir, const CifarSet& train, const CifarSet& test) {
  fs::path root = fs::path(dir) / "cifar-100-binary";
  fs::create_directories(root);
  WriteFile((root / "train.bin").string(), BinaryRecords(train, 0, train.size(), true));
  WriteFile((root / "test.bin").string(), BinaryRecords(test, 0, test.size(), true));
  std::string fine, coarse;
  for (const auto& n : Numbered("fine_", 100)) fine += n + "\n";
  for (const auto& n : Numbered("coarse_", 20)) coarse += n + "\n";
  Write(root / "fine_label_names.txt", fine);
  Write(root / "coarse_label_names.txt", coarse);
  return root.string();
}

std::string WriteCifar10PythonPy2(const std::string& dir, const CifarSet& train, int batches, const CifarSet& test) {
  fs::path root = fs::path(dir) / "cifar-10-batches-py";
  fs::create_directories(root);
  size_t per = (train.size() + size_t(batches) - 1) / size_t(batches);
  for (int b = 0; b < batches; ++b) {
    size_t from = std::min(train.size(), size_t(b) * per), to = std::min(train.size(), from + per);
    Write(root / ("data_batch_" + std::to_string(b + 1)), Py2Batch(train, from, to, false, "training batch " + std::to_string(b + 1) + " of 5"));
  }
  Write(root / "test_batch", Py2Batch(test, 0, test.size(), false, "testing batch 1 of 1"));
  Write(root / "batches.meta", Py2Names({{"label_names", writer::Cifar10ClassNames()}}));
  return root.string();
}

std::string WriteCifar100PythonPy2(const std::string& dir, const CifarSet& train, const CifarSet& test) {
  fs::path root = fs::path(dir) / "cifar-100-python";
  fs::create_directories(root);
  Write(root / "train", Py2Batch(train, 0, train.size(), true, "training batch 1 of 1"));
  Write(root / "test", Py2Batch(test, 0, test.size(), true, "testing batch 1 of 1"));
  Write(root / "meta", Py2Names({{"fine_label_names", Numbered("fine_", 100)}, {"coarse_label_names", Numbered("coarse_", 20)}}));
  return root.string();
}

std::string WriteCifarPythonPy3(const std::string& dir, const CifarSet& train, int batches, const CifarSet& test,
                                int protocol, bool hundred, bool bytes_keys) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) return "";
  fs::create_directories(dir);
  // Hand the pixels over as CIFAR binary records; the script repacks them as python-version pickles.
  auto write_set = [&](const CifarSet& s, const std::string& name) {
    WriteFile((fs::path(dir) / name).string(), BinaryRecords(s, 0, s.size(), hundred));
  };
  write_set(train, "train.records");
  write_set(test, "test.records");
  std::string cmd = "/usr/bin/python3 " + std::string(DSC_TEST_SCRIPTS) + "/gen_cifar_py3.py '" + dir + "' " +
                    std::to_string(protocol) + " " + std::to_string(batches) + " " + (hundred ? "100" : "10") + " " +
                    (bytes_keys ? "bytes" : "str");
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("gen_cifar_py3.py failed: " + cmd);
  return (fs::path(dir) / (hundred ? "cifar-100-python" : "cifar-10-batches-py")).string();
}

}  // namespace dsc::test
