// The writer's file-based source parsers and the image input path. The first byte picks the parser,
// the rest is the file: a CIFAR binary batch (10 or 100), a CIFAR python batch, a manifest, or an
// image file (JPEG or PNG) handed to the encoder (pass-through, raw, auto, resize).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "format/error.h"
#include "tests/fuzz/fuzz_targets.h"
#include "writer/encoder.h"
#include "writer/source.h"

namespace {

std::string Dir() {
  static std::string d = [] {
    auto p = std::filesystem::temp_directory_path() / ("dsc-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    return p.string();
  }();
  return d;
}

void Write(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), std::streamsize(size));
}

void LoadAll(const dsc::writer::Source& s) {
  dsc::writer::SourceItem item;
  for (size_t i = 0; i < s.size() && i < 64; ++i) {
    try {
      s.Load(i, &item);
    } catch (const dsc::Error&) {
    }
  }
}

}  // namespace

DSC_FUZZ_TARGET {
  if (size < 1) return 0;
  const uint8_t kind = data[0] % 5;
  ++data;
  --size;
  const std::string dir = Dir() + "/" + std::to_string(kind);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  try {
    if (kind == 0 || kind == 1) {
      Write(dir + (kind == 0 ? "/data_batch_1.bin" : "/train.bin"), data, size);
      LoadAll(*dsc::writer::OpenCifarBinary(dir, "train"));
    } else if (kind == 2) {
      Write(dir + "/data_batch_1", data, size);
      LoadAll(*dsc::writer::OpenCifarPython(dir, "train"));
    } else if (kind == 3) {
      Write(dir + "/list.tsv", data, size);
      LoadAll(*dsc::writer::OpenManifest(dir + "/list.tsv"));
    } else {
      dsc::writer::SourceItem item;
      item.bytes.assign(data, data + size);
      item.where = "fuzz.jpg";
      for (const char* enc : {"default", "raw", "auto"}) {
        dsc::writer::EncodeOptions o;
        o.encoding = enc;
        o.max_resolution = 16;
        dsc::writer::Encoder e(o);
        dsc::writer::Encoded out;
        try {
          e.Encode(item, &out);
        } catch (const dsc::Error&) {
        }
      }
    }
  } catch (const dsc::Error&) {
  }
  return 0;
}
