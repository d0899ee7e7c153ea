// CPU row kernels for the last step of the loader: interleaved uint8 RGB -> normalised float planes.
// An AVX2 version is picked at run time when the CPU has it; both give the same bits as
// kernels::Normalize (separate multiply and add, no FMA).
#pragma once
#include <cstddef>
#include <cstdint>

namespace dsc::kernels {

// r[x], g[x], b[x] = Normalize(rgb[3x + c], scale[c], bias[c]) for x < w; with `reverse`, the row is
// written mirrored (r[w - 1 - x] = ...). With AVX-512, aligned outputs are written with streaming
// stores (the batch is read by the consumer, not by this core): call StreamFence() before publishing
// the batch.
void NormalizeRowPlanar(const uint8_t* rgb, size_t w, float* r, float* g, float* b, const float scale[3],
                        const float bias[3], bool reverse = false);
void StreamFence();
// The portable version (tests compare the two).
void NormalizeRowPlanarScalar(const uint8_t* rgb, size_t w, float* r, float* g, float* b, const float scale[3],
                              const float bias[3], bool reverse = false);

}  // namespace dsc::kernels
