// The interpreter's memory: loads, stores and atomic adds through tensors of pointers (masked lanes
// untouched, every lane bounds-checked before any is written) and block pointers (boundary-checked dims
// padded on load and skipped on store), and the out-of-bounds error that names the op's call site, the
// buffer and the index.
#include "dsl/interpreter_state.h"

#include "dsl/scalar_eval.h"

namespace kiln::interp_detail {

namespace {

std::string index_str(llvm::ArrayRef<int64_t> idx) {
  return idx.size() == 1 ? fmt::format("({},)", idx[0]) : fmt::format("({})", fmt::join(idx, ", "));
}

} // namespace

void Interpreter::out_of_bounds(const Op& op, const HostBuffer* b, int64_t index, const std::string& which,
                                const std::string& hint) const {
  fail_at(
      op.loc,
      "{}: {} addresses element {} of '{}', which is out of bounds (the buffer holds {} elements of {}){}",
      op_name(op.kind), which, index, buffer_name(b), b->numel(), dtype_name(b->dtype), hint);
}

void Interpreter::exec_load(const Op& op) {
  const Type& t = type(op.result());
  const Tile& p = val(op.operands[0]);
  const Tile* mask = op.has_mask ? &val(op.operands[1]) : nullptr;
  const Tile* other = op.has_mask ? &val(op.operands[2]) : nullptr;
  Tile& out = val(op.result());
  size_t n = p.i.size();
  const bool as_float = is_float(t.elem);
  (as_float ? (void)out.f.resize(n) : (void)out.i.resize(n));
  for (size_t j = 0; j < n; ++j) {
    if (mask && !mask->i[j]) { // masked off: `other`, and memory is not touched
      (as_float ? (void)(out.f[j] = other->f[j]) : (void)(out.i[j] = other->i[j]));
      continue;
    }
    check_in_bounds(op, p.buf[j], p.i[j], static_cast<int64_t>(j));
    (as_float ? (void)(out.f[j] = p.buf[j]->read_float(p.i[j]))
              : (void)(out.i[j] = p.buf[j]->read_int(p.i[j])));
  }
}

// Every unmasked lane is checked before any is written, so a failing store writes nothing.
void Interpreter::exec_store(const Op& op) {
  const Tile &p = val(op.operands[0]), &v = val(op.operands[1]);
  const Tile* mask = op.has_mask ? &val(op.operands[2]) : nullptr;
  const bool as_float = is_float(type(op.operands[1]).elem);
  size_t n = p.i.size();
  for (size_t j = 0; j < n; ++j)
    if (!mask || mask->i[j])
      check_in_bounds(op, p.buf[j], p.i[j], static_cast<int64_t>(j));
  for (size_t j = 0; j < n; ++j) {
    if (mask && !mask->i[j])
      continue;
    (as_float ? p.buf[j]->write_float(p.i[j], v.f[j]) : p.buf[j]->write_int(p.i[j], v.i[j]));
  }
}

// Lanes apply in order, so lanes hitting one address accumulate; masked-off lanes return 0.
void Interpreter::exec_atomic_add(const Op& op) {
  const Tile &p = val(op.operands[0]), &v = val(op.operands[1]);
  const Tile* mask = op.has_mask ? &val(op.operands[2]) : nullptr;
  const DType t = type(op.operands[1]).elem;
  Tile& out = val(op.result());
  size_t n = p.i.size();
  for (size_t j = 0; j < n; ++j)
    if (!mask || mask->i[j])
      check_in_bounds(op, p.buf[j], p.i[j], static_cast<int64_t>(j));
  auto active = [&](size_t j) { return !mask || mask->i[j]; };
  if (is_float(t)) {
    out.f.assign(n, 0.0);
    with_float_binary(BinaryOp::Add, t, [&](auto add) {
      for (size_t j = 0; j < n; ++j)
        if (active(j)) {
          out.f[j] = p.buf[j]->read_float(p.i[j]);
          p.buf[j]->write_float(p.i[j], add(out.f[j], v.f[j]));
        }
    });
    return;
  }
  out.i.assign(n, 0);
  with_int_binary(BinaryOp::Add, t, [&](auto add) {
    for (size_t j = 0; j < n; ++j)
      if (active(j)) {
        out.i[j] = p.buf[j]->read_int(p.i[j]);
        p.buf[j]->write_int(p.i[j], add(out.i[j], v.i[j]).value);
      }
  });
}

void Interpreter::exec_make_block_ptr(const Op& op) {
  const int r = type(op.result()).rank();
  const Tile& base = val(op.operands[0]);
  BlockPtrState& s = val(op.result()).block;
  s.buffer = base.buf[0];
  s.base = base.i[0];
  s.shape.resize(r);
  s.strides.resize(r);
  s.offsets.resize(r);
  for (int d = 0; d < r; ++d) {
    s.shape[d] = scalar_int(op.operands[1 + d]);
    s.strides[d] = scalar_int(op.operands[1 + r + d]);
    s.offsets[d] = scalar_int(op.operands[1 + 2 * r + d]);
  }
}

// load/store through a block pointer: element (i0, i1, ...) of the block is tensor element
// (offsets[d] + i_d) at base + sum (offsets[d] + i_d) * strides[d]. Along boundary-checked dims an
// index outside [0, shape[d]) is padded on load and skipped on store; along the others it is not
// masked, and an address outside the buffer is an Error.
void Interpreter::exec_block_access(const Op& op) {
  const bool is_load = op.kind == OpKind::LoadBlock;
  const Type& bt = type(op.operands[0]);
  const BlockPtrState& s = val(op.operands[0]).block;
  const int r = bt.rank();
  const bool as_float = is_float(bt.elem);
  llvm::SmallVector<bool, 3> checked(r, false);
  for (int64_t d : op.checked_dims())
    checked[d] = true;

  const int64_t n = bt.numel();
  // Address of each element, or -1 where a boundary check masks it. Computed first so that a
  // store that fails writes nothing.
  positions_.resize(n);
  llvm::SmallVector<int64_t, 3> idx(r, 0);
  for (int64_t j = 0; j < n; ++j) {
    int64_t addr = s.base;
    bool masked = false;
    for (int d = 0; d < r; ++d) {
      int64_t at = s.offsets[d] + idx[d];
      if (checked[d] && (at < 0 || at >= s.shape[d]))
        masked = true;
      addr += at * s.strides[d];
    }
    if (!masked && (addr < 0 || addr >= s.buffer->numel())) {
      llvm::SmallVector<int64_t, 3> at(r);
      std::string hint;
      for (int d = 0; d < r; ++d) {
        at[d] = s.offsets[d] + idx[d];
        if (!checked[d] && (at[d] < 0 || at[d] >= s.shape[d]) && hint.empty())
          hint = fmt::format(
              "; dim {} is outside the tensor and unchecked: add it to boundary_check to pad it", d);
      }
      out_of_bounds(op, s.buffer, addr,
                    fmt::format("block element {} (tensor index {} of shape {}, boundary_check={{{}}})",
                                index_str(idx), index_str(at), index_str(s.shape),
                                fmt::join(op.checked_dims(), ", ")),
                    hint);
    }
    positions_[j] = masked ? -1 : addr;
    for (int d = r - 1; d >= 0; --d) {
      if (++idx[d] < bt.shape[d])
        break;
      idx[d] = 0;
    }
  }

  if (is_load) {
    Tile& out = val(op.result());
    if (as_float) {
      const double pad = round_to_float(op.padding.value, bt.elem);
      out.f.resize(n);
      for (int64_t j = 0; j < n; ++j)
        out.f[j] = positions_[j] < 0 ? pad : s.buffer->read_float(positions_[j]);
    } else {
      const auto pad = static_cast<int64_t>(op.padding.value); // the verifier checked the dtype holds it
      out.i.resize(n);
      for (int64_t j = 0; j < n; ++j)
        out.i[j] = positions_[j] < 0 ? pad : s.buffer->read_int(positions_[j]);
    }
    return;
  }
  const Tile& v = val(op.operands[1]);
  if (op.kind == OpKind::AtomicAddBlock) { // each element's sum rounded to the block's dtype, as atomic_add's
    if (as_float)
      with_float_binary(BinaryOp::Add, bt.elem, [&](auto add) {
        for (int64_t j = 0; j < n; ++j)
          if (positions_[j] >= 0)
            s.buffer->write_float(positions_[j], add(s.buffer->read_float(positions_[j]), v.f[j]));
      });
    else
      with_int_binary(BinaryOp::Add, bt.elem, [&](auto add) {
        for (int64_t j = 0; j < n; ++j)
          if (positions_[j] >= 0)
            s.buffer->write_int(positions_[j], add(s.buffer->read_int(positions_[j]), v.i[j]).value);
      });
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    if (positions_[j] < 0)
      continue;
    (as_float ? s.buffer->write_float(positions_[j], v.f[j]) : s.buffer->write_int(positions_[j], v.i[j]));
  }
}

} // namespace kiln::interp_detail
