#include "codegen/layout.h"

#include "codegen/mma_shape.h"
#include "support/error.h"

#include <algorithm>

namespace kiln {

namespace {

Coord unit(int rank, int dim, int64_t step) {
  Coord c(rank, 0);
  c[dim] = step;
  return c;
}

int log2i(int64_t x) {
  int b = 0;
  while ((int64_t{1} << b) < x)
    ++b;
  return b;
}

// Fills the remaining extent of each dim (in `order`, fastest first) with register bits.
void cover_with_registers(Layout& l, std::vector<int64_t>& covered, llvm::ArrayRef<int> order) {
  for (int d : order)
    while (covered[d] < l.shape[d]) {
      l.reg.push_back(unit(l.rank(), d, covered[d]));
      covered[d] *= 2;
    }
}

// Assigns `bits` bases, each to the first dim in `order` not yet covered; replicas once all are.
void assign_bits(std::vector<Coord>& bases, int bits, Layout& l, std::vector<int64_t>& covered,
                 llvm::ArrayRef<int> order) {
  for (int b = 0; b < bits; ++b) {
    int dim = -1;
    for (int d : order)
      if (covered[d] < l.shape[d]) {
        dim = d;
        break;
      }
    if (dim < 0) {
      bases.push_back(Coord(l.rank(), 0));
      continue;
    }
    bases.push_back(unit(l.rank(), dim, covered[dim]));
    covered[dim] *= 2;
  }
}

} // namespace

int64_t Layout::reg_offset(int r, int dim) const {
  int64_t off = 0;
  for (size_t b = 0; b < reg.size(); ++b)
    if (r >> b & 1)
      off += reg[b][dim];
  return off;
}

Coord Layout::element(int r, int lane, int warp) const {
  Coord c(shape.size(), 0);
  for (const auto& [bases, bits] : {std::pair{&reg, r}, {&this->lane, lane}, {&this->warp, warp}})
    for (size_t b = 0; b < bases->size(); ++b)
      if (bits >> b & 1)
        for (size_t d = 0; d < c.size(); ++d)
          c[d] += (*bases)[b][d];
  return c;
}

const char* layout_kind_name(LayoutKind k) {
  switch (k) {
  case LayoutKind::Mma: return "mma";
  case LayoutKind::MmaA: return "mma_a";
  case LayoutKind::MmaB: return "mma_b";
  case LayoutKind::Slice: return "slice";
  case LayoutKind::Blocked: break;
  }
  return "blocked";
}

std::string Layout::kind_name() const {
  return std::string(layout_kind_name(kind)) + (collapsed ? "_collapsed" : "");
}

std::string Layout::str() const {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i)
    dims += (i ? "x" : "") + std::to_string(shape[i]);
  return fmt::format("{}[{}] regs={}", kind_name(), dims, num_regs());
}

std::string Layout::bases_str() const {
  std::string s;
  for (auto [name, bases] : {std::pair{"reg", &reg}, {"lane", &lane}, {"warp", &warp}}) {
    s += (s.empty() ? "" : " ") + std::string(name);
    for (const Coord& c : *bases) {
      std::string coord;
      for (size_t i = 0; i < c.size(); ++i)
        coord += (i ? "," : "") + std::to_string(c[i]);
      s += " (" + coord + ")";
    }
  }
  return s;
}

Layout blocked_layout(const Shape& shape, int num_warps, int vec, llvm::ArrayRef<int> order_in) {
  Layout l;
  l.shape = shape;
  l.kind = LayoutKind::Blocked;
  int r = l.rank();
  llvm::SmallVector<int, 4> order(order_in.begin(), order_in.end());
  if (order.empty())
    for (int d = r - 1; d >= 0; --d)
      order.push_back(d);
  std::vector<int64_t> covered(r, 1);
  if (r > 0) {
    int fast = order[0];
    int64_t v = std::min<int64_t>(vec, shape[fast]);
    while (covered[fast] < v) {
      l.reg.push_back(unit(r, fast, covered[fast]));
      covered[fast] *= 2;
    }
  }
  assign_bits(l.lane, 5, l, covered, order);
  // Warps go to the slowest dims first, so that each warp's lanes stay on contiguous memory.
  llvm::SmallVector<int, 4> warp_order(order.rbegin(), order.rend());
  assign_bits(l.warp, log2i(num_warps), l, covered, warp_order);
  cover_with_registers(l, covered, order);
  return l;
}

Layout default_layout(const Shape& shape, DType elem, int num_warps) {
  return blocked_layout(shape, num_warps, std::max(1, 16 / dtype_bytes(elem)));
}

namespace {

// The warp split shared by the mma layouts: warp bit b goes along M for the first log2(warps_m)
// bits, then along N; `dim_m`/`dim_n` say which dim of this operand is M / N (-1: it does not span
// it, and a zero basis replicates the operand over the warps that split the other one).
// Along M the warps interleave at the granularity of one fragment's 16 rows (warp i holds rows
// 16i + 16 * warps_m * mt), so that four consecutive warps hold 64 consecutive rows: the rows of one Hopper
// warpgroup MMA (m64), whose accumulator is then the same layout as mma.sync's. Along N each warp holds
// a contiguous block of tile_n columns.
void mma_warps(Layout& l, int dim_m, int dim_n, int64_t tile_n, const WarpSplit& w) {
  const int64_t rows = mma_sync_shape(DType::f16).m;
  for (int b = 0; (1 << b) < w.warps_m; ++b)
    l.warp.push_back(dim_m >= 0 ? unit(l.rank(), dim_m, rows << b) : Coord(l.rank(), 0));
  for (int b = 0; (1 << b) < w.warps_n; ++b)
    l.warp.push_back(dim_n >= 0 ? unit(l.rank(), dim_n, tile_n << b) : Coord(l.rank(), 0));
  while ((1 << l.warp.size()) < w.num_warps) // replicas
    l.warp.push_back(Coord(l.rank(), 0));
}

void check_mma_tile(int64_t M, int64_t N, int warps_m, int warps_n, int64_t inst_m, int64_t inst_n) {
  KILN_INTERNAL_CHECK(M % (inst_m * warps_m) == 0 && N % (inst_n * warps_n) == 0,
                      "tile {}x{} does not split over {}x{} warps of {}x{} instructions", M, N, warps_m, warps_n,
                      inst_m, inst_n);
}

} // namespace

// The mma layouts are tiles of the instructions' fragments (mma_shape.h): one warp's share of the tile holds
// its fragments' registers, the fragment's own bits lowest (the emitters find them by FragmentTiling), and the
// warps split the tile as mma_warps says. The f32 accumulator fragment is the same for every mma.sync shape,
// and a wgmma accumulator is this layout too (its warpgroup's warps hold 16 consecutive rows each).
Layout mma_acc_layout(int64_t M, int64_t N, const WarpSplit& w) {
  const Fragment& c = mma_sync_shape(DType::f16).c;
  check_mma_tile(M, N, w.warps_m, w.warps_n, c.rows, c.cols);
  Layout l;
  l.shape = {M, N};
  l.kind = LayoutKind::Mma;
  const int64_t wm = M / w.warps_m, wn = N / w.warps_n; // per-warp tile
  l.reg = tile_register_bases(c, 1, wn, wm, w.warps_m);
  l.lane = c.lane;
  mma_warps(l, 0, 1, wn, w);
  return l;
}

Layout mma_a_layout(int64_t M, int64_t K, const WarpSplit& w, DType in) {
  const Fragment& a = mma_sync_shape(in).a;
  check_mma_tile(M, K, w.warps_m, 1, a.rows, a.cols);
  Layout l;
  l.shape = {M, K};
  l.kind = LayoutKind::MmaA;
  l.reg = tile_register_bases(a, 1, K, M / w.warps_m, w.warps_m);
  l.lane = a.lane;
  mma_warps(l, 0, -1, 0, w);
  return l;
}

Layout mma_b_layout(int64_t K, int64_t N, const WarpSplit& w, DType in) {
  const Fragment& b = mma_sync_shape(in).b;
  check_mma_tile(K, N, 1, w.warps_n, b.rows, b.cols);
  Layout l;
  l.shape = {K, N};
  l.kind = LayoutKind::MmaB;
  const int64_t wn = N / w.warps_n;
  l.reg = tile_register_bases(b, 0, K, wn, 1);
  l.lane = b.lane;
  mma_warps(l, -1, 1, wn, w);
  return l;
}

Layout slice_layout(const Layout& p, int dim) {
  Layout l;
  l.kind = LayoutKind::Slice;
  l.parent = std::make_shared<const Layout>(p);
  l.parent_dim = dim;
  l.shape = p.shape;
  l.shape.erase(l.shape.begin() + dim);
  auto drop = [&](const Coord& c) {
    Coord out = c;
    out.erase(out.begin() + dim);
    return out;
  };
  for (const Coord& c : p.reg) {
    Coord d = drop(c);
    if (std::any_of(d.begin(), d.end(), [](int64_t x) { return x != 0; }))
      l.reg.push_back(d);
  }
  for (const Coord& c : p.lane)
    l.lane.push_back(drop(c));
  for (const Coord& c : p.warp)
    l.warp.push_back(drop(c));
  return l;
}

Layout expand_layout(const Layout& x, int axis) {
  Layout l = x;
  if (!(x.parent && !x.expanded && axis == x.parent_dim))
    l.parent.reset();
  l.expanded = l.parent != nullptr;
  l.shape.insert(l.shape.begin() + axis, 1);
  for (auto* bases : {&l.reg, &l.lane, &l.warp})
    for (Coord& c : *bases)
      c.insert(c.begin() + axis, 0);
  return l;
}

Layout squeeze_layout(const Layout& x, int axis) {
  Layout l = x;
  l.shape.erase(l.shape.begin() + axis);
  for (auto* bases : {&l.reg, &l.lane, &l.warp})
    for (Coord& c : *bases)
      c.erase(c.begin() + axis);
  return l;
}

std::optional<Layout> broadcast_parent(const Layout& x, const Shape& shape) {
  if (x.parent && x.expanded && x.parent->shape == shape)
    return *x.parent;
  return std::nullopt;
}

Layout trans_layout(const Layout& x) {
  Layout l = x;
  l.parent.reset();
  std::swap(l.shape[0], l.shape[1]);
  for (auto* bases : {&l.reg, &l.lane, &l.warp})
    for (Coord& c : *bases)
      std::swap(c[0], c[1]);
  return l;
}

Layout collapse_layout(const Layout& dst, const Shape& src_shape) {
  Layout l;
  l.kind = dst.kind;
  l.collapsed = true;
  l.shape = src_shape;
  auto collapse = [&](const Coord& c) {
    Coord out = c;
    for (size_t d = 0; d < out.size(); ++d)
      if (src_shape[d] == 1)
        out[d] = 0;
    return out;
  };
  for (const Coord& c : dst.reg) {
    Coord d = collapse(c);
    if (std::any_of(d.begin(), d.end(), [](int64_t x) { return x != 0; }))
      l.reg.push_back(d);
  }
  for (const Coord& c : dst.lane)
    l.lane.push_back(collapse(c));
  for (const Coord& c : dst.warp)
    l.warp.push_back(collapse(c));
  return l;
}

std::vector<int> broadcast_register_map(const Layout& src, const Layout& dst) {
  Layout want = collapse_layout(dst, src.shape);
  if (!want.same_bases(src))
    return {};
  // dst register bits that survive the collapse keep their order in src.
  std::vector<int> kept; // dst bit -> src bit, or -1
  int next = 0;
  for (const Coord& c : dst.reg) {
    bool survives = false;
    for (size_t d = 0; d < c.size(); ++d)
      survives |= src.shape[d] != 1 && c[d] != 0;
    kept.push_back(survives ? next++ : -1);
  }
  std::vector<int> map(dst.num_regs());
  for (int r = 0; r < dst.num_regs(); ++r) {
    int s = 0;
    for (size_t b = 0; b < kept.size(); ++b)
      if (kept[b] >= 0 && (r >> b & 1))
        s |= 1 << kept[b];
    map[r] = s;
  }
  return map;
}

int register_run(const Layout& x, int dim, int max_run) {
  int run = 1;
  for (size_t b = 0; b < x.reg.size() && run * 2 <= max_run; ++b) {
    if (x.reg[b] != unit(x.rank(), dim, run))
      break;
    run *= 2;
  }
  return run;
}

Layout widen_register_run(const Layout& x, int dim, int max_run, std::vector<LaneRegisterSwap>& swaps) {
  Layout w = x;
  for (int run = register_run(w, dim, max_run); run * 2 <= max_run; run = register_run(w, dim, max_run)) {
    const int k = log2i(run); // the register bit that should step `run` along dim next
    if (k >= static_cast<int>(w.reg.size()))
      break;
    const Coord want = unit(w.rank(), dim, run);
    auto lane = std::find(w.lane.begin(), w.lane.end(), want);
    if (lane == w.lane.end())
      break;
    std::swap(*lane, w.reg[k]);
    swaps.push_back({static_cast<int>(lane - w.lane.begin()), k});
  }
  return w;
}

ReductionPlan reduction_plan(const Layout& x, int dim) {
  ReductionPlan p;
  auto moves = [&](const Coord& c) {
    for (size_t d = 0; d < c.size(); ++d)
      if (c[d] != 0 && static_cast<int>(d) != dim)
        return false;
    return c[dim] != 0;
  };
  for (size_t b = 0; b < x.reg.size(); ++b)
    if (moves(x.reg[b]))
      p.reg_bits.push_back(static_cast<int>(b));
  for (size_t b = 0; b < x.lane.size(); ++b)
    if (moves(x.lane[b]))
      p.lane_bits.push_back(static_cast<int>(b));
  for (size_t b = 0; b < x.warp.size(); ++b)
    if (moves(x.warp[b]))
      p.warp_bits.push_back(static_cast<int>(b));
  return p;
}

} // namespace kiln
