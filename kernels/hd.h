// DSC_HD marks per-element functions that run both in CPU code and inside CUDA kernels; the CPU tests
// execute exactly the code the GPU launcher uses.
#pragma once
#if defined(__CUDACC__)
#define DSC_HD __host__ __device__ __forceinline__
#else
#define DSC_HD inline
#endif
