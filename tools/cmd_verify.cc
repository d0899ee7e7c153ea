#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "format/error.h"
#include "format/ffcv.h"
#include "format/file_view.h"
#include "kernels/limits.h"
#include "reader/dataset.h"
#include "reader/decode_rgb.h"
#include "reader/file_source.h"
#include "reader/mmap_guard.h"
#include "tools/commands.h"
#include "tools/loader_flags.h"
#include "tools/verify_twin.h"

namespace dsc::tools {

namespace {

// The file VerifyOne opened, lent to a Dataset: a Dataset that fails to open during the block pass
// must not take the source the pass goes on reading.
class Borrowed : public format::ByteSource {
 public:
  explicit Borrowed(const format::ByteSource& s) : s_(s) {}
  const std::string& name() const override { return s_.name(); }
  uint64_t size() const override { return s_.size(); }
  const uint8_t* Read(uint64_t off, size_t n, std::vector<uint8_t>* scratch) const override { return s_.Read(off, n, scratch); }
  const uint8_t* ReadHeld(uint64_t off, size_t n, format::ReadBuffer* buf) const override { return s_.ReadHeld(off, n, buf); }
  const uint8_t* mapped() const override { return s_.mapped(); }
  bool remote() const override { return s_.remote(); }
  void WillNeed(uint64_t off, uint64_t n) const override { s_.WillNeed(off, n); }
  void DontNeed(uint64_t off, uint64_t n) const override { s_.DontNeed(off, n); }
  bool Resident(uint64_t off, uint64_t n) const override { return s_.Resident(off, n); }

 private:
  const format::ByteSource& s_;
};

}  // namespace

// Checks one file; its exit code.
int VerifyOne(const std::string& file, bool decode, bool twin, const DecodeOptions& options, const DatasetOptions& source) {
  try {
    const std::unique_ptr<format::ByteSource> src = OpenSource(file, source);  // a URL streams (docs/streaming.md)
    const format::ByteSource& bytes = *src;
    // Each payload's own header against its index entry (a wrong size or channel count is damage even
    // when the checksums hold: a writer's bug); with --decode, the whole payload. The samples whose
    // payloads lie in the blocks checked so far are checked while the block pass holds those blocks
    // (a URL's blocks are fetched once); their findings count only if the blocks are intact.
    std::unique_ptr<Dataset> ds;
    std::unique_ptr<SampleDecoder> decoder;
    std::vector<uint32_t> images{0};  // the first image and format 1.3's further ones
    std::vector<std::string> findings;
    std::vector<uint8_t> rgb;
    std::unique_ptr<TwinCheck> twin_check;  // --decoder gpu-twin: each JPEG decoded by the twin as well
    if (twin) twin_check = std::make_unique<TwinCheck>(file, options.fancy_upsampling);
    uint64_t next = 0;  // the first sample not checked yet
    bool early = true;  // samples are checked during the block pass (until the dataset cannot open there)
    auto open = [&] {
      ds = std::make_unique<Dataset>(std::make_unique<Borrowed>(bytes), DatasetOptions{});
      decoder = std::make_unique<SampleDecoder>(*ds, options);
      for (size_t f = 1; f < ds->meta().fields.size(); ++f)
        if (format::IsFurtherImage(ds->meta(), f)) images.push_back(uint32_t(f));
    };
    auto check_samples = [&](uint64_t end, uint64_t count) {  // those before `count` whose payloads end by `end`
      for (; next < std::min<uint64_t>(ds->size(), count); ++next) {
        uint64_t last = 0;  // where its payloads end
        try {
          for (uint32_t image : images) {
            const format::IndexEntry e = ds->entry(next, image);
            last = std::max(last, e.offset + e.size);
          }
        } catch (const Error&) {
          last = 0;  // checked now: the check below reports what is wrong with its entry
        }
        if (last > end) return;
        for (uint32_t image : images) {
          try {
            if (decode) {
              decoder->Decode(next, &rgb, image);
              if (twin_check && image == 0) twin_check->Check(*ds, next);
            } else
              decoder->CheckPayload(next, image);
          } catch (const Error& e) {
            findings.push_back(e.what());
          }
        }
      }
    };
    auto check_early = [&](uint64_t end, uint64_t count) {
      if (!early) return;
      try {
        if (!ds) open();
      } catch (const Error&) {
        early = false;  // opened again below, where its error is reported
        return;
      }
      check_samples(end, count);
    };
    const format::AfterBlock after_block = [&](uint64_t end) { check_early(end, UINT64_MAX); };
    const auto after_samples = [&](uint64_t n) { check_early(UINT64_MAX, n); };  // an FFCV file's
    std::vector<format::Problem> problems;
    // VerifyFile reads every byte of the mapping: a file shrinking meanwhile must not kill us.
    if (!mmap_guard::RunGuarded([&] { problems = format::VerifyFile(bytes, after_block, after_samples); }))
      throw Error(file + ": bytes no longer readable (file truncated or I/O error)");
    for (const auto& p : problems) std::fprintf(stderr, "%s: %s\n", file.c_str(), format::Describe(p).c_str());
    if (!problems.empty()) {
      const bool foreign = problems.size() == 1 && problems[0].message.find("FFCV") != std::string::npos;
      if (!foreign)  // not damaged: another program's file, and the message above says so
        std::fprintf(stderr, "%s: DAMAGED (%zu problem%s)\n", file.c_str(), problems.size(), problems.size() == 1 ? "" : "s");
      return kExitBad;
    }
    if (!ds && format::ffcv::IsFfcv(bytes)) {
      const auto f = format::ffcv::File::Open(&bytes);
      if (!std::any_of(f->fields().begin(), f->fields().end(), [](const auto& fd) { return fd.type == format::ffcv::kRgbImage; })) {
        std::printf("%s: OK (FFCV file: %llu samples, %zu fields, no image; its structure checked)\n", file.c_str(),
                    (unsigned long long)f->sample_count(), f->fields().size());
        return kExitOk;
      }
    }
    if (!ds) open();
    if (!mmap_guard::RunGuarded([&] { check_samples(UINT64_MAX, UINT64_MAX); }))  // those past the block pass
      throw Error(file + ": bytes no longer readable (file truncated or I/O error)");
    for (const std::string& e : findings) std::fprintf(stderr, "%s\n", e.c_str());
    const size_t bad = findings.size();
    if (bad) {
      std::fprintf(stderr, "%s: %zu sample(s) %s\n", file.c_str(), bad,
                   decode ? "do not decode" : "do not match their index entry");
      std::fprintf(stderr, "%s: DAMAGED (%zu problem%s)\n", file.c_str(), bad, bad == 1 ? "" : "s");
      return kExitBad;
    }
    if (twin_check) {
      twin_check->Print();
      if (!twin_check->ok()) return kExitBad;
    }
    std::printf("%s: OK (%s%llu samples, %zu blocks, %llu bytes%s)\n", file.c_str(), ds->view().ffcv() ? "FFCV file: " : "",
                (unsigned long long)ds->size(),
                ds->view().block_count(), (unsigned long long)ds->view().header().file_size, decode ? ", every sample decoded" : "");
    std::fflush(stdout);  // in order with the DAMAGED lines on stderr, also through a pipe
    return kExitOk;
  } catch (const Error& e) {
    std::fprintf(stderr, "dsc verify: error: %s\n", e.what());
    return kExitBad;
  }
}


int CmdVerify(int argc, char** argv) {
  cli::Options opts("dsc verify", "Check every checksum, every index entry (against its payload's own header)\n"
                    "and every must-be-zero byte of a dsc file. On damage, prints the section (as `dsc info --json` names it) and the\n"
                    "block or sample, and exits 1.");
  opts.positional_help("FILE...");
  opts.add_options()("decode", "also decode every sample")
      ("upsampling", "with --decode: JPEG chroma upsampling, box (the loader's default) or fancy",
       cli::value<std::string>()->default_value("box"))
      ("decoder", "with --decode: cpu, or gpu-twin (also compare the GPU JPEG decoder's host twin with\n"
       "libjpeg-turbo on every JPEG sample, with the same --upsampling; exit 1 on any mismatch)", cli::value<std::string>()->default_value("cpu"))
      ("max-pixels", "with --decode: refuse images larger than this many pixels",
       cli::value<uint64_t>()->default_value(std::to_string(kernels::kDefaultMaxPixels)))
      ("h,help", "show this help")("files", "", cli::value<std::vector<std::string>>());
  const LoaderFlagSet source_flags = SourceFlags(true);  // a URL's blocks pass through its cache
  DeclareLoaderFlags(opts, source_flags, nullptr);
  opts.parse_positional({"files"});
  std::vector<std::string> files;
  bool decode = false, twin = false;
  DecodeOptions options;
  DatasetOptions source;
  try {
    auto r = Parse(opts, argc, argv);
    if (r.count("help")) { std::fputs(opts.help().c_str(), stdout); return kExitOk; }
    if (!r.count("files")) throw cli::UsageError("expected FILE");
    files = r["files"].as<std::vector<std::string>>();
    decode = r.count("decode") > 0;
    options.max_pixels = r["max-pixels"].as<uint64_t>();
    const std::string up = r["upsampling"].as<std::string>();
    if (up != "box" && up != "fancy") throw cli::UsageError("--upsampling must be box or fancy");
    options.fancy_upsampling = up == "fancy";
    const std::string dec = r["decoder"].as<std::string>();
    if (dec != "cpu" && dec != "gpu-twin") throw cli::UsageError("--decoder must be cpu or gpu-twin");
    twin = dec == "gpu-twin";
    for (const char* o : {"decoder", "upsampling", "max-pixels"})  // they change only what --decode does
      if (r.count(o) && !decode) throw cli::UsageError(std::string("--") + o + " needs --decode");
    if (options.max_pixels == 0) throw cli::UsageError("--max-pixels 0 would refuse every image");
    source = SourceOptions(r, source_flags);
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "dsc verify: %s\n\n%s", e.what(), opts.help().c_str());
    return kExitUsage;
  }
  int rc = kExitOk;  // every file is checked; 1 when any is damaged
  for (const auto& f : files) rc = std::max(rc, VerifyOne(f, decode, twin, options, source));
  return rc;
}

}  // namespace dsc::tools
