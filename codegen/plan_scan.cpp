#include "codegen/plan_scan.h"

namespace kiln {

ScanSplit plan_scan(const Kernel& k, const Op& scan, int threads) {
  const Shape& s = k.type(scan.operands[0]).shape;
  ScanSplit p;
  p.len = s[scan.axis];
  for (size_t d = scan.axis + 1; d < s.size(); ++d)
    p.stride *= s[d];
  p.lines = k.type(scan.operands[0]).numel() / p.len;
  // Tile dims are powers of two, so are len, lines and every chunk count tried here.
  while (p.chunks * 2 * p.lines <= threads && p.chunks * 2 * p.chunks * 2 <= p.len)
    p.chunks *= 2;
  return p;
}

DType scan_accumulator(DType t) { return is_half(t) ? DType::f32 : t; }

int64_t scan_scratch_bytes(const Kernel& k, const Op& scan) {
  const Type& t = k.type(scan.operands[0]);
  return t.numel() * dtype_bytes(scan_accumulator(t.elem));
}

} // namespace kiln
