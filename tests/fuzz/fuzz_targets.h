// Fuzz targets: each takes arbitrary bytes and must end in success or a dsc::Error, never a crash,
// hang or sanitizer report. Built as libFuzzer programs under clang (DSC_FUZZ=ON) and, under any
// compiler, as replay programs that run a corpus directory (CI replays the corpus and past crashes).
#pragma once
#include <cstddef>
#include <cstdint>

#define DSC_FUZZ_TARGET extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
