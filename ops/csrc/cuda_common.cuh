// Shared by the CUDA kernels: launch geometry, exact arithmetic helpers and
// the headers every .cu needs. Only headers the CPU torch wheel ships too
// are used (no ATen/cuda/CUDAContext.h, which pulls in cuBLAS/cuSPARSE), so
// CI can compile the kernels with nvcc on machines without a CUDA torch.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>

namespace streamseg {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n items (capped; the loop covers the rest).
inline unsigned int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min<int64_t>(b, 65535 * 8)));
}

// Products rounded on their own (never fused into an FMA), so that IoUs
// equal the CPU's bit for bit.
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }

#define STREAMSEG_GRID_LOOP(i, n)                                                    \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

}  // namespace streamseg
