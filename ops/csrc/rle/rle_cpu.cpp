// CPU mask -> COCO RLE, parallel over masks. Each mask is transposed in
// cache-sized tiles to column-major bytes, then scanned 8 bytes at a time:
// runs in real masks are long, so most words are skipped whole.
#include "rle.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ne.h>

#include <algorithm>
#include <cstring>

namespace streamseg {
namespace {

constexpr int64_t kTile = 64;

void transpose_tiled(const uint8_t* src, int64_t h, int64_t w, uint8_t* dst) {
  for (int64_t y0 = 0; y0 < h; y0 += kTile) {
    const int64_t y1 = std::min(y0 + kTile, h);
    for (int64_t x0 = 0; x0 < w; x0 += kTile) {
      const int64_t x1 = std::min(x0 + kTile, w);
      for (int64_t x = x0; x < x1; ++x)
        for (int64_t y = y0; y < y1; ++y) dst[x * h + y] = src[y * w + x];
    }
  }
}

// Run lengths of a 0/1 byte sequence, starting with a run of zeros.
void run_lengths(const uint8_t* p, int64_t n, std::vector<int64_t>& counts) {
  counts.clear();
  uint8_t value = 0;
  int64_t start = 0, i = 0;
  while (i < n) {
    // Skip whole words equal to the current value.
    const uint64_t pattern = value ? 0x0101010101010101ULL : 0;
    while (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, p + i, 8);
      if (word != pattern) break;
      i += 8;
    }
    while (i < n && p[i] == value) ++i;
    if (i < n) {
      counts.push_back(i - start);
      start = i;
      value ^= 1;
    }
  }
  counts.push_back(n - start);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> pack_strings(const std::vector<std::string>& strings) {
  const int64_t n = static_cast<int64_t>(strings.size());
  int64_t total = 0;
  for (const auto& s : strings) total += static_cast<int64_t>(s.size());
  at::Tensor chars = at::empty({total}, at::TensorOptions().dtype(at::kByte));
  at::Tensor lengths = at::empty({n}, at::TensorOptions().dtype(at::kLong));
  uint8_t* c = chars.mutable_data_ptr<uint8_t>();
  int64_t* l = lengths.mutable_data_ptr<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    std::memcpy(c, strings[k].data(), strings[k].size());
    c += strings[k].size();
    l[k] = static_cast<int64_t>(strings[k].size());
  }
  return {chars, lengths};
}

std::tuple<at::Tensor, at::Tensor> mask_to_rle_cpu(const at::Tensor& masks_in) {
  TORCH_CHECK(masks_in.dim() == 3, "masks must be (N, h, w), got ", masks_in.sizes());
  TORCH_CHECK(
      masks_in.scalar_type() == at::kBool || masks_in.scalar_type() == at::kByte,
      "masks must be bool, got ", masks_in.scalar_type());
  // A bool tensor's bytes are 0/1; other bytes are made so.
  const at::Tensor masks =
      masks_in.scalar_type() == at::kBool ? masks_in.contiguous() : masks_in.ne(0).contiguous();
  const int64_t n = masks.size(0), h = masks.size(1), w = masks.size(2);
  const auto* data = reinterpret_cast<const uint8_t*>(masks.const_data_ptr<bool>());
  std::vector<std::string> strings(static_cast<size_t>(n));
  at::parallel_for(0, n, 1, [&](int64_t lo, int64_t hi) {
    std::vector<uint8_t> columns(static_cast<size_t>(h * w));
    std::vector<int64_t> counts;
    for (int64_t k = lo; k < hi; ++k) {
      transpose_tiled(data + k * h * w, h, w, columns.data());
      run_lengths(columns.data(), h * w, counts);
      append_coco_string(counts, strings[k]);
    }
  });
  return pack_strings(strings);
}

}  // namespace streamseg
