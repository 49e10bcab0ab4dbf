// The interpreter: kiln's reference semantics. Every IR value of a program holds a flat row-major
// array (doubles for floats, int64 for integers so that i64 stays exact, buffer + element offset
// for pointers) or a block pointer's state; each op computes its whole result with one loop and
// rounds it to the result dtype, exactly as the GPU path must. This file binds the arguments, runs the grid,
// dispatches and executes every op but memory accesses (interpreter_memory.cpp; the state both share is
// interpreter_state.h).
#include "dsl/interpreter_state.h"

#include "dsl/reduce_eval.h"
#include "dsl/scalar_eval.h"
#include "support/env.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

// The generated kernels' Philox generator, compiled here as host code (the same text: same numbers).
#define KILN_PHILOX_FN inline
#include "codegen/prelude/kiln_philox.cuh"
#undef KILN_PHILOX_FN

namespace kiln {

namespace {

// ---- dtype conversions ----

// Rounds every element to the float dtype `t` (the dtype chosen once, outside the loop).
void round_all(std::vector<double>& xs, DType t) {
  with_float_rounding(t, [&](auto round) {
    for (double& x : xs)
      x = round(x);
  });
}

// f32 rounded to tf32 (10 explicit mantissa bits, round to nearest even), as tensor cores read it.
float round_to_tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) { // finite: inf and nan pass through
    u += 0xfffu + ((u >> 13) & 1u);
    u &= ~0x1fffu;
  }
  std::memcpy(&x, &u, 4);
  return x;
}

// ---- values ----

enum class Rep : uint8_t { Float, Int, Pointer, Block };

Rep rep_of(const Type& t) {
  switch (t.kind) {
  case TypeKind::Tensor:
    return is_float(t.elem) ? Rep::Float : Rep::Int;
  case TypeKind::Pointer:
    return Rep::Pointer;
  case TypeKind::BlockPtr:
    return Rep::Block;
  }
  return Rep::Float;
}

// For each element of `shape` in row-major order, the source position sum(index[d] * strides[d]).
void strided_positions(const Shape& shape, llvm::ArrayRef<int64_t> strides, std::vector<int64_t>& out) {
  int r = static_cast<int>(shape.size());
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  out.resize(n);
  if (r == 0) {
    out[0] = 0;
    return;
  }
  llvm::SmallVector<int64_t, 4> idx(r, 0);
  int64_t inner = shape[r - 1], inner_stride = strides[r - 1], pos = 0;
  for (int64_t j = 0; j < n; j += inner) {
    for (int64_t t = 0; t < inner; ++t)
      out[j + t] = pos + t * inner_stride;
    for (int d = r - 2; d >= 0; --d) {
      pos += strides[d];
      if (++idx[d] < shape[d])
        break;
      pos -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

} // namespace

// ---- the interpreter proper ----

namespace interp_detail {

void Interpreter::bind(llvm::ArrayRef<InterpArg> args) {
  if (args.size() != k_.params.size()) {
    // Which parameters go without an argument (by name, position from 1 and type), or how many are extra.
    std::string names, which;
    for (size_t n = 0; n < k_.params.size(); ++n) {
      const Param& p = k_.params[n];
      names += (n ? ", " : "") + p.name;
      if (n >= args.size())
        which += fmt::format("{}argument {} '{}' ({})", which.empty() ? "" : ", ", n + 1, p.name,
                             type(p.value).str());
    }
    const size_t missing = k_.params.size() > args.size() ? k_.params.size() - args.size() : 0;
    fail("kernel '{}' takes {} arguments ({}), got {}: {}", k_.name, k_.params.size(), names, args.size(),
         missing == 0   ? fmt::format("{} too many (arguments are given in the parameters' order)",
                                      args.size() - k_.params.size())
         : missing == 1 ? which + " is missing"
                        : which + " are missing");
  }
  for (size_t n = 0; n < args.size(); ++n) {
    const Param& p = k_.params[n];
    const Type& t = type(p.value);
    const InterpArg& a = args[n];
    Tile& v = val(p.value);
    if (t.is_pointer()) {
      if (!a.buffer)
        fail("argument '{}' of kernel '{}' is a {} and needs a buffer (InterpArg::ptr), got a scalar", p.name,
             k_.name, t.str());
      if (a.buffer->dtype != t.elem)
        fail("argument '{}' of kernel '{}' is a {} but its buffer{} holds {}", p.name, k_.name, t.str(),
             a.buffer->name.empty() ? "" : " '" + a.buffer->name + "'", dtype_name(a.buffer->dtype));
      v.i.assign(1, 0);
      v.buf.assign(1, a.buffer);
      names_.emplace(a.buffer, a.buffer->name.empty() ? p.name : a.buffer->name);
      continue;
    }
    if (a.buffer)
      fail("argument '{}' of kernel '{}' is a scalar {} but got a buffer{}", p.name, k_.name, t.str(),
           a.buffer->name.empty() ? "" : " '" + a.buffer->name + "'");
    if (is_float(t.elem)) {
      v.f.assign(1, round_to_float(a.f, t.elem));
      continue;
    }
    if (a.f != static_cast<double>(a.i))
      fail("argument '{}' of kernel '{}' is {} but got the non-integer value {}", p.name, k_.name, t.str(),
           a.f);
    if (!int_fits(a.i, t.elem))
      fail("argument '{}' of kernel '{}' is {} but {} does not fit in it", p.name, k_.name, t.str(), a.i);
    v.i.assign(1, a.i);
  }
}

void Interpreter::run_grid() {
  for (int d = 0; d < 3; ++d)
    if (grid_[d] < 1)
      fail("kernel '{}': grid must be at least 1 in every dim, got ({}, {}, {})", k_.name, grid_[0], grid_[1],
           grid_[2]);
  for (pid_[2] = 0; pid_[2] < grid_[2]; ++pid_[2])
    for (pid_[1] = 0; pid_[1] < grid_[1]; ++pid_[1])
      for (pid_[0] = 0; pid_[0] < grid_[0]; ++pid_[0])
        run_region(k_.body);
}

void Interpreter::run_region(const Region& r) {
  for (const auto& op : r.ops)
    if (op->kind != OpKind::Yield) // a yield is read by its parent
      exec(*op);
}

void Interpreter::exec(const Op& op) {
  switch (op.kind) {
  case OpKind::Constant:
    return exec_constant(op);
  case OpKind::Arange: {
    Tile& out = val(op.result());
    int64_t lo = op.arange_lo(), n = op.arange_hi() - op.arange_lo();
    out.i.resize(n);
    for (int64_t j = 0; j < n; ++j)
      out.i[j] = lo + j;
    return;
  }
  case OpKind::ProgramId:
    val(op.result()).i.assign(1, pid_[op.axis]);
    return;
  case OpKind::NumPrograms:
    val(op.result()).i.assign(1, grid_[op.axis]);
    return;
  case OpKind::Broadcast:
    return exec_broadcast(op);
  case OpKind::ExpandDims:
  case OpKind::Reshape:
    val(op.result()) = val(op.operands[0]);
    return; // row-major data is unchanged
  case OpKind::Trans:
    return exec_trans(op);
  case OpKind::Unary:
    return exec_unary(op);
  case OpKind::Binary:
    return exec_binary(op);
  case OpKind::Cast:
    return exec_cast(op);
  case OpKind::Where:
    return exec_where(op);
  case OpKind::Rand:
    return exec_rand(op);
  case OpKind::Dot:
    return exec_dot(op);
  case OpKind::Reduce:
  case OpKind::ArgMax:
  case OpKind::Scan:
  case OpKind::Sort: {
    const Tile& x = val(op.operands[0]);
    Tile& out = val(op.result());
    run_along_axis(k_, op, x.f, x.i, out.f, out.i);
    return;
  }
  case OpKind::Fma: {
    const DType t = type(op.result()).elem;
    const Tile &a = val(op.operands[0]), &b = val(op.operands[1]), &c = val(op.operands[2]);
    Tile& out = val(op.result());
    out.f.resize(a.f.size());
    for (size_t j = 0; j < a.f.size(); ++j)
      out.f[j] = fma_element(a.f[j], b.f[j], c.f[j], t);
    return;
  }
  case OpKind::AddPtr: {
    const Tile &p = val(op.operands[0]), &off = val(op.operands[1]);
    Tile& out = val(op.result());
    out.buf = p.buf;
    out.i.resize(p.i.size());
    for (size_t j = 0; j < p.i.size(); ++j)
      out.i[j] = p.i[j] + off.i[j];
    return;
  }
  case OpKind::Load:
    return exec_load(op);
  case OpKind::Store:
    return exec_store(op);
  case OpKind::AtomicAdd:
    return exec_atomic_add(op);
  case OpKind::MakeBlockPtr:
    return exec_make_block_ptr(op);
  case OpKind::Advance: {
    Tile& out = val(op.result());
    out.block = val(op.operands[0]).block;
    for (size_t d = 0; d < out.block.offsets.size(); ++d)
      out.block.offsets[d] += scalar_int(op.operands[1 + d]);
    return;
  }
  case OpKind::LoadBlock:
  case OpKind::StoreBlock:
  case OpKind::AtomicAddBlock:
    return exec_block_access(op);
  case OpKind::For:
    return exec_for(op);
  case OpKind::If:
    return exec_if(op);
  case OpKind::Yield:
    return;
  }
  throw InternalError(fmt::format("interpreter: unknown op kind {}", static_cast<int>(op.kind)));
}

void Interpreter::exec_constant(const Op& op) {
  const Type& t = type(op.result());
  Tile& out = val(op.result());
  const ScalarValue c = eval_constant(op, t.elem);
  (is_float(t.elem) ? out.f.assign(t.numel(), c.f) : out.i.assign(t.numel(), c.i));
}

// out[j] = x[positions[j]] for a strided view of the operand; works for every kind of tensor.
void Interpreter::exec_gather(const Op& op, llvm::ArrayRef<int64_t> src_strides) {
  const Type& t = type(op.result());
  const Tile& x = val(op.operands[0]);
  Tile& out = val(op.result());
  strided_positions(t.shape, src_strides, positions_);
  size_t n = positions_.size();
  switch (rep_of(t)) {
  case Rep::Float:
    out.f.resize(n);
    for (size_t j = 0; j < n; ++j)
      out.f[j] = x.f[positions_[j]];
    return;
  case Rep::Pointer:
    out.buf.resize(n);
    for (size_t j = 0; j < n; ++j)
      out.buf[j] = x.buf[positions_[j]];
    [[fallthrough]];
  case Rep::Int:
    out.i.resize(n);
    for (size_t j = 0; j < n; ++j)
      out.i[j] = x.i[positions_[j]];
    return;
  case Rep::Block:
    out = x;
    return;
  }
}

void Interpreter::exec_broadcast(const Op& op) {
  const Type& xt = type(op.operands[0]);
  const Type& t = type(op.result());
  // Stride 0 along stretched dims (and everywhere for a rank-0 splat).
  llvm::SmallVector<int64_t, 4> strides(t.rank(), 0);
  if (xt.rank() == t.rank()) {
    int64_t s = 1;
    for (int d = t.rank() - 1; d >= 0; --d) {
      strides[d] = xt.shape[d] == 1 ? 0 : s;
      s *= xt.shape[d];
    }
  }
  exec_gather(op, strides);
}

void Interpreter::exec_trans(const Op& op) {
  const Type& xt = type(op.operands[0]); // (R, C) -> (C, R)
  int64_t strides[2] = {1, xt.shape[1]};
  exec_gather(op, strides);
}

void Interpreter::exec_unary(const Op& op) {
  const DType t = type(op.result()).elem;
  const Tile& x = val(op.operands[0]);
  Tile& out = val(op.result());
  if (is_float(t)) {
    out.f.resize(x.f.size());
    with_float_unary(op.unary, t, [&](auto fn) {
      for (size_t j = 0; j < x.f.size(); ++j)
        out.f[j] = fn(x.f[j]);
    });
    return;
  }
  out.i.resize(x.i.size());
  with_int_unary(op.unary, t, [&](auto fn) {
    for (size_t j = 0; j < x.i.size(); ++j)
      out.i[j] = fn(x.i[j]).value;
  });
}

void Interpreter::exec_binary(const Op& op) {
  const DType t = type(op.operands[0]).elem; // operand dtype; comparisons produce i1
  const Tile &a = val(op.operands[0]), &b = val(op.operands[1]);
  Tile& out = val(op.result());
  if (!is_float(t)) {
    const size_t n = a.i.size();
    // The evaluator fails on a zero divisor too; checked here first so that the error names the op and lane.
    for (size_t j = 0; j < n; ++j)
      if (divides_by_zero(op.binary, b.i[j]))
        fail_at(op.loc, "{}: integer division by zero ({} {} 0 in lane {})", binary_name(op.binary), a.i[j],
                op.binary == BinaryOp::Div ? "/" : "%", j);
    out.i.resize(n);
    with_int_binary(op.binary, t, [&](auto fn) {
      for (size_t j = 0; j < n; ++j)
        out.i[j] = fn(a.i[j], b.i[j]).value;
    });
    return;
  }
  const size_t n = a.f.size();
  if (is_comparison(op.binary)) {
    out.i.resize(n);
    with_float_comparison(op.binary, [&](auto fn) {
      for (size_t j = 0; j < n; ++j)
        out.i[j] = fn(a.f[j], b.f[j]);
    });
    return;
  }
  out.f.resize(n);
  with_float_binary(op.binary, t, [&](auto fn) {
    for (size_t j = 0; j < n; ++j)
      out.f[j] = fn(a.f[j], b.f[j]);
  });
}

void Interpreter::exec_cast(const Op& op) {
  const DType from = type(op.operands[0]).elem, to = type(op.result()).elem;
  const Tile& x = val(op.operands[0]);
  Tile& out = val(op.result());
  if (is_float(from) && is_float(to)) {
    out.f = x.f;
    round_all(out.f, to);
  } else if (is_float(from)) {
    out.i.resize(x.f.size());
    for (size_t j = 0; j < x.f.size(); ++j)
      out.i[j] = float_to_int(x.f[j], to);
  } else if (is_float(to)) {
    out.f.resize(x.i.size());
    for (size_t j = 0; j < x.i.size(); ++j)
      out.f[j] = int_to_float(x.i[j], to);
  } else {
    out.i.resize(x.i.size());
    for (size_t j = 0; j < x.i.size(); ++j)
      out.i[j] = cast_int(x.i[j], to).value;
  }
}

void Interpreter::exec_rand(const Op& op) {
  const Tile &seed = val(op.operands[0]), &offsets = val(op.operands[1]);
  Tile& out = val(op.result());
  out.f.resize(offsets.i.size());
  for (size_t j = 0; j < offsets.i.size(); ++j)
    out.f[j] = op.random == RandomDist::Normal ? philox_normal(seed.i[j], offsets.i[j])
                                               : philox_uniform(seed.i[j], offsets.i[j]);
}

void Interpreter::exec_where(const Op& op) {
  const Tile &c = val(op.operands[0]), &a = val(op.operands[1]), &b = val(op.operands[2]);
  Tile& out = val(op.result());
  size_t n = c.i.size();
  switch (rep_of(type(op.result()))) {
  case Rep::Float:
    out.f.resize(n);
    for (size_t j = 0; j < n; ++j)
      out.f[j] = c.i[j] ? a.f[j] : b.f[j];
    return;
  case Rep::Pointer:
    out.buf.resize(n);
    for (size_t j = 0; j < n; ++j)
      out.buf[j] = c.i[j] ? a.buf[j] : b.buf[j];
    [[fallthrough]];
  case Rep::Int:
    out.i.resize(n);
    for (size_t j = 0; j < n; ++j)
      out.i[j] = c.i[j] ? a.i[j] : b.i[j];
    return;
  case Rep::Block:
    out = c.i[0] ? a : b;
    return;
  }
}

// c (M, N) = acc + a (M, K) @ b (K, N). Each output element accumulates in k order, starting from
// acc, rounding to the accumulator dtype after every multiply-add:
//   f16/bf16: products are exact in f32, so c = f32(c + a*b);
//   f32 with tf32: operands rounded to tf32 first, products again exact in f32;
//   f32: a fused multiply-add in f32 (fmaf), as the scalar-FMA path computes it;
//   f64: a fused multiply-add in f64.
void Interpreter::exec_dot(const Op& op) {
  const Type& at = type(op.operands[0]);
  const Type& bt = type(op.operands[1]);
  const int64_t M = at.shape[0], K = at.shape[1], N = bt.shape[1];
  const Tile &a = val(op.operands[0]), &b = val(op.operands[1]), &acc = val(op.operands[2]);
  Tile& out = val(op.result());
  if (at.elem == DType::f64) {
    out.f = acc.f;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) {
        const double aik = a.f[i * K + k];
        const double* brow = &b.f[k * N];
        double* crow = &out.f[i * N];
        for (int64_t j = 0; j < N; ++j)
          crow[j] = std::fma(aik, brow[j], crow[j]);
      }
    return;
  }
  dot_a_.assign(a.f.begin(), a.f.end());
  dot_b_.assign(b.f.begin(), b.f.end());
  dot_c_.assign(acc.f.begin(), acc.f.end());
  const bool fused = at.elem == DType::f32 && !op.tf32;
  if (op.tf32) {
    for (float& v : dot_a_)
      v = round_to_tf32(v);
    for (float& v : dot_b_)
      v = round_to_tf32(v);
  }
  for (int64_t i = 0; i < M; ++i) {
    float* crow = &dot_c_[i * N];
    for (int64_t k = 0; k < K; ++k) {
      const float aik = dot_a_[i * K + k];
      const float* brow = &dot_b_[k * N];
      if (fused)
        for (int64_t j = 0; j < N; ++j)
          crow[j] = std::fma(aik, brow[j], crow[j]);
      else // the product is exact in f32, so this is the same single rounding as an fma
        for (int64_t j = 0; j < N; ++j)
          crow[j] = crow[j] + aik * brow[j];
    }
  }
  out.f.assign(dot_c_.begin(), dot_c_.end());
}

void Interpreter::exec_for(const Op& op) {
  const int64_t lo = scalar_int(op.operands[0]), hi = scalar_int(op.operands[1]),
                step = scalar_int(op.operands[2]);
  if (step <= 0)
    fail_at(op.loc, "for_range step must be positive, got {}", step);
  const Region& body = op.regions[0];
  const Op& yield = *body.ops.back();
  const size_t carried = op.results.size();
  for (size_t n = 0; n < carried; ++n)
    val(body.args[1 + n]) = val(op.operands[3 + n]);
  // Yielded values go through `next` so that a body that swaps carried values reads the old ones.
  std::vector<Tile> next(carried);
  for (int64_t iv = lo; iv < hi; iv += step) {
    val(body.args[0]).i.assign(1, iv);
    run_region(body);
    for (size_t n = 0; n < carried; ++n)
      next[n] = val(yield.operands[n]);
    for (size_t n = 0; n < carried; ++n)
      std::swap(val(body.args[1 + n]), next[n]);
  }
  for (size_t n = 0; n < carried; ++n)
    val(op.results[n]) = val(body.args[1 + n]);
}

void Interpreter::exec_if(const Op& op) {
  const Region& taken = op.regions[scalar_int(op.operands[0]) ? 0 : 1];
  run_region(taken);
  const Op& yield = *taken.ops.back();
  for (size_t n = 0; n < op.results.size(); ++n)
    val(op.results[n]) = val(yield.operands[n]);
}

} // namespace interp_detail

// ---- entry points ----

void interpret(const Kernel& k, const Grid& grid, llvm::ArrayRef<InterpArg> args) {
  interp_detail::Interpreter interp(k, grid);
  interp.bind(args);
  interp.run_grid();
}

bool interpret_requested() {
  const std::string v =
      env_choice("KILN_INTERPRET", {"0", "1", "false", "true", "off", "on", "no", "yes"}).value_or("0");
  return v == "1" || v == "true" || v == "on" || v == "yes";
}

} // namespace kiln
