// The interpreter's state and its executors, one member function per op family: interpreter.cpp binds
// the arguments, runs the grid, dispatches, and executes the arithmetic, shape, dot and control-flow ops;
// interpreter_memory.cpp executes loads, stores and atomics through tensors of pointers and block
// pointers, and raises their out-of-bounds errors. Internal to the interpreter (dsl/interpreter.h is its
// interface).
#pragma once

#include "dsl/interpreter.h"

#include <llvm/ADT/SmallVector.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::interp_detail {

struct BlockPtrState {
  HostBuffer* buffer = nullptr;
  int64_t base = 0; // element offset of the base pointer
  llvm::SmallVector<int64_t, 3> shape, strides, offsets;
};

// The run-time value of one IR value. Which members are in use follows from its Type (rep_of in
// interpreter.cpp).
struct Tile {
  std::vector<double> f;        // floating-point tensors
  std::vector<int64_t> i;       // integer tensors (i1 as 0/1); element offsets of pointer tensors
  std::vector<HostBuffer*> buf; // pointer tensors: the buffer each element points into
  BlockPtrState block;          // block pointers
};

class Interpreter {
public:
  Interpreter(const Kernel& k, const Grid& grid) : k_(k), grid_(grid), vals_(k.values.size()) {}

  void bind(llvm::ArrayRef<InterpArg> args);
  void run_grid();

private:
  const Type& type(ValueId v) const { return k_.type(v); }
  Tile& val(ValueId v) { return vals_[v]; }
  int64_t scalar_int(ValueId v) const { return vals_[v].i.at(0); }
  const std::string& buffer_name(const HostBuffer* b) const { return names_.at(b); }

  void run_region(const Region& r);
  void exec(const Op& op);

  void exec_constant(const Op& op);
  void exec_gather(const Op& op, llvm::ArrayRef<int64_t> src_strides);
  void exec_broadcast(const Op& op);
  void exec_trans(const Op& op);
  void exec_unary(const Op& op);
  void exec_binary(const Op& op);
  void exec_cast(const Op& op);
  void exec_where(const Op& op);
  void exec_rand(const Op& op);
  void exec_dot(const Op& op);
  void exec_load(const Op& op);
  void exec_store(const Op& op);
  void exec_atomic_add(const Op& op);
  void exec_make_block_ptr(const Op& op);
  void exec_block_access(const Op& op);
  void exec_for(const Op& op);
  void exec_if(const Op& op);

  [[noreturn]] void out_of_bounds(const Op& op, const HostBuffer* b, int64_t index, const std::string& which,
                                  const std::string& hint = {}) const;
  void check_in_bounds(const Op& op, const HostBuffer* b, int64_t index, int64_t lane) const {
    if (index < 0 || index >= b->numel())
      out_of_bounds(op, b, index, fmt::format("lane {} of the pointer tile", lane));
  }

  const Kernel& k_;
  Grid grid_;
  int64_t pid_[3] = {0, 0, 0};
  std::vector<Tile> vals_;
  std::unordered_map<const HostBuffer*, std::string> names_; // for error messages
  std::vector<int64_t> positions_;                           // scratch for gathers
  std::vector<float> dot_a_, dot_b_, dot_c_;                 // scratch for dot
};

} // namespace kiln::interp_detail
