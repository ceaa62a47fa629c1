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

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "crop_run_lengths reads 8 pixels as one little-endian word");

// Buffers crop_run_lengths reuses from one crop to the next.
struct CropScratch {
  std::vector<std::pair<int64_t, int64_t>> found;  // (column, frame position), row order
  std::vector<int64_t> start, edges;
  std::vector<uint8_t> zeros;
};

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

// Frame-size column-major run lengths of one crop: `p` is its 0/1 bytes,
// row-major (hb rows of wb, contiguous), placed at column x0 and row y0 of
// an h-row frame of `total` pixels; the frame is zero outside the crop.
//
// A run boundary in column c lies between rows r - 1 and r where those two
// pixels differ (rows -1 and hb being the zeros around the box). They are
// found row by row, comparing a row with the one above 8 bytes at a time
// (inside an object most words are equal and skipped whole), then put in
// column-major order by a counting sort on the column. Boundary (c, r) is
// frame position (x0 + c) * h + y0 + r.
void crop_run_lengths(const uint8_t* p, int64_t hb, int64_t wb, int64_t x0, int64_t y0,
                      int64_t h, int64_t total, CropScratch& s, std::vector<int64_t>& counts) {
  counts.clear();
  s.found.clear();
  s.zeros.assign(static_cast<size_t>(wb), 0);
  const uint8_t* zeros = s.zeros.data();
  for (int64_t r = 0; r <= hb; ++r) {
    const uint8_t* above = r > 0 ? p + (r - 1) * wb : zeros;
    const uint8_t* row = r < hb ? p + r * wb : zeros;
    int64_t c = 0;
    // 8 bytes at a time: inside an object most words are equal. Each
    // differing byte is a boundary (bytes are 0/1, so the XOR's set bits
    // mark them); little-endian byte order is column order.
    for (; c + 8 <= wb; c += 8) {
      uint64_t a, b;
      std::memcpy(&a, above + c, 8);
      std::memcpy(&b, row + c, 8);
      for (uint64_t x = a ^ b; x != 0; x &= x - 1) {
        const int64_t col = c + (__builtin_ctzll(x) >> 3);
        s.found.emplace_back(col, (x0 + col) * h + y0 + r);
      }
    }
    for (; c < wb; ++c) {
      if (above[c] != row[c]) s.found.emplace_back(c, (x0 + c) * h + y0 + r);
    }
  }
  // Counting sort by column; rows stay ascending within a column.
  s.start.assign(static_cast<size_t>(wb) + 1, 0);
  for (const auto& f : s.found) ++s.start[static_cast<size_t>(f.first) + 1];
  for (int64_t c = 0; c < wb; ++c) s.start[c + 1] += s.start[c];
  s.edges.resize(s.found.size());
  for (const auto& f : s.found) s.edges[static_cast<size_t>(s.start[f.first]++)] = f.second;
  // A fall at the frame's bottom and a rise at the next column's top are the
  // same position: the run goes on, so both go.
  int64_t last = 0;
  for (int64_t e : s.edges) {
    if (!counts.empty() && e == last) {
      const int64_t undone = counts.back();
      counts.pop_back();
      last -= undone;
      continue;
    }
    counts.push_back(e - last);
    last = e;
  }
  // The zeros after the last one (the whole frame for an empty mask); none
  // when a one is the frame's last pixel.
  if (total > last || counts.empty()) counts.push_back(total - last);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> crops_to_rle_cpu(
    at::TensorList crops, const at::Tensor& boxes_in, int64_t height, int64_t width) {
  const int64_t n = static_cast<int64_t>(crops.size());
  TORCH_CHECK_VALUE(
      boxes_in.dim() == 2 && boxes_in.size(1) == 4 && !boxes_in.is_floating_point(),
      "boxes must be (N, 4) integers, got shape ", boxes_in.sizes(), " ", boxes_in.scalar_type());
  TORCH_CHECK_VALUE(
      boxes_in.size(0) == n, "crops and boxes must have the same length, got ", n, " and ",
      boxes_in.size(0));
  const at::Tensor boxes = boxes_in.to(at::kLong).contiguous();
  const int64_t* b = boxes.const_data_ptr<int64_t>();
  std::vector<std::string> strings(static_cast<size_t>(n));
  std::vector<int64_t> counts;
  CropScratch scratch;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t x0 = b[4 * k], y0 = b[4 * k + 1], x1 = b[4 * k + 2], y1 = b[4 * k + 3];
    TORCH_CHECK_VALUE(
        0 <= x0 && x0 <= x1 && x1 <= width && 0 <= y0 && y0 <= y1 && y1 <= height, "boxes[", k,
        "] = [", x0, ", ", y0, ", ", x1, ", ", y1, "] is not inside the ", height, "x", width,
        " frame");
    const at::Tensor& crop = crops[k];
    TORCH_CHECK_VALUE(
        crop.dim() == 2 && crop.size(0) == y1 - y0 && crop.size(1) == x1 - x0, "crops[", k,
        "] must be (", y1 - y0, ", ", x1 - x0, ") for its box, got ", crop.sizes());
    TORCH_CHECK_VALUE(
        crop.device().is_cpu() &&
            (crop.scalar_type() == at::kBool || crop.scalar_type() == at::kByte),
        "crops[", k, "] must be a bool CPU tensor, got ", crop.scalar_type(), " on ",
        crop.device());
    // Row-major 0/1 bytes (a bool tensor's bytes are 0/1; other bytes are made so).
    const at::Tensor bytes =
        crop.scalar_type() == at::kBool ? crop.contiguous() : crop.ne(0).contiguous();
    const auto* p = static_cast<const uint8_t*>(bytes.const_data_ptr());
    crop_run_lengths(p, y1 - y0, x1 - x0, x0, y0, height, height * width, scratch, counts);
    append_coco_string(counts, strings[k]);
  }
  return pack_strings(strings);
}

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
