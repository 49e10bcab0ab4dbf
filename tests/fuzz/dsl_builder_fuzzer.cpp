// Fuzzes the DSL (dsl/dsl.h) with random small programs: the input is read as a sequence of DSL calls on a
// pool of values (sources, elementwise operators, casts, shape changes, reductions, dot, masked and
// block-pointer loads, stores and atomic adds, loops and branches whose bodies are the calls that follow). A
// call the DSL refuses with a kiln::Error is skipped, as a user who catches it would go on; the program that
// remains must either verify and run in the interpreter, or be refused with a kiln::Error there. Any other exception
// (kiln::InternalError included), a crash, a hang or a sanitizer report is a bug.
#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "dsl/printer.h"
#include "support/error.h"

#include "tests/fuzz/fuzz_input.h"

#include <array>
#include <cstddef>
#include <cstdint>

using namespace kiln;

namespace {

constexpr int64_t kBufferElements = 256; // x (read) and y (written); every program indexes into these
constexpr int64_t kN = 100;              // the scalar argument n
constexpr size_t kSlots = 8;             // values a program works on
constexpr size_t kIndexSlot = 7;         // starts as an i32 scalar; a loop's index goes there
constexpr int kMaxCalls = 32;            // DSL calls per program, bodies included
constexpr int kMaxDepth = 2;             // nesting of loops and branches

enum class Call : uint8_t {
  Binary, BinaryLiteral, Unary, Math, Cast, Arange, Full, ProgramId, ExpandDims, Trans, Reshape, BroadcastTo,
  Reduce, Dot, Where, Load, Store, AtomicAdd, BlockLoad, BlockStore, BlockAtomicAdd, Loop, Branch, kLast = Branch
};

class ProgramBuilder {
public:
  ProgramBuilder(kiln::fuzz::FuzzInput& in, Value x, Value y, Value n) : in_(in), x_(x), y_(y) {
    slots_ = {arange(0, 16), program_id(0), n, load(x + arange(0, 16), arange(0, 16) < n),
              zeros({16, 16}, f16), full({16}, 1.5, f32), arange(0, 16).expand_dims(1), scalar(2, i32)};
  }

  // The calls until the input or the call budget runs out.
  void calls(int depth) {
    while (in_.remaining() > 0 && calls_ < kMaxCalls)
      call(depth);
  }

private:
  Value& slot() { return slots_[in_.integer<size_t>(0, kSlots - 1)]; }

  // Mostly the small powers of two a tile has; sometimes a size a tile cannot have.
  int64_t dim() {
    if (in_.integer<int>(0, 15) == 0)
      return in_.pick<int64_t>({0, -1, 3, 1 << 20});
    return int64_t{1} << in_.integer<int>(0, 4);
  }
  Shape shape() {
    Shape s;
    for (int rank = in_.integer<int>(0, 2); rank > 0; --rank)
      s.push_back(dim());
    return s;
  }
  DType dtype() { return in_.pick({i1, u8, i32, i64, f16, bf16, f32, f64}); }
  int axis() { return in_.integer<int>(-1, 2); }
  int64_t small_int() { return in_.integer<int64_t>(-4, 20); }
  Operand literal() {
    if (in_.boolean())
      return Operand(small_int());
    return Operand(in_.pick({0.0, -0.5, 1.0, 3.25, 1e30, -1e30}));
  }

  // The calls of a loop or branch body: the next few, one level deeper.
  void body(int depth) {
    for (int count = in_.integer<int>(0, 4); count > 0 && calls_ < kMaxCalls; --count)
      call(depth + 1);
  }

  // A refused call leaves the builder as it was (an op is appended only once its type checks), so the program
  // goes on without it; a refused loop or branch ends the program.
  void call(int depth) {
    ++calls_;
    const Call c = in_.choice<Call>();
    if (c == Call::Loop || c == Call::Branch)
      return control_flow(c, depth);
    try {
      simple_call(c);
    } catch (const Error&) {
    }
  }

  void control_flow(Call c, int depth) {
    if (depth >= kMaxDepth)
      return;
    if (c == Call::Loop) {
      const int64_t lo = small_int(), hi = small_int(), step = in_.integer<int64_t>(-1, 3);
      for_range(lo, hi, step, [&](Value i) {
        slots_[kIndexSlot] = i; // an i32 scalar there already, so that it carries across iterations
        body(depth);
      });
    } else {
      if_(slots_[kIndexSlot] > small_int(), [&] { body(depth); }, [&] { body(depth); });
    }
  }

  void simple_call(Call c) {
    Value& out = slot();
    switch (c) {
    case Call::Binary: {
      const Value &a = slot(), &b = slot();
      switch (in_.integer<int>(0, 16)) {
      case 0: out = a + b; break;
      case 1: out = a - b; break;
      case 2: out = a * b; break;
      case 3: out = a / b; break;
      case 4: out = a % b; break;
      case 5: out = a < b; break;
      case 6: out = a <= b; break;
      case 7: out = a > b; break;
      case 8: out = a >= b; break;
      case 9: out = a == b; break;
      case 10: out = a != b; break;
      case 11: out = a && b; break;
      case 12: out = a || b; break;
      case 13: out = a & b; break;
      case 14: out = a | b; break;
      case 15: out = minimum(a, b); break;
      default: out = maximum(a, b); break;
      }
      break;
    }
    case Call::BinaryLiteral: {
      const Value& a = slot();
      const Operand b = literal();
      switch (in_.integer<int>(0, 5)) {
      case 0: out = a + b; break;
      case 1: out = b - a; break;
      case 2: out = a * b; break;
      case 3: out = a / b; break;
      case 4: out = a % b; break;
      default: out = cdiv(a, b); break;
      }
      break;
    }
    case Call::Unary: {
      const Value& a = slot();
      out = in_.boolean() ? -a : !a;
      break;
    }
    case Call::Math: {
      const Value& a = slot();
      switch (in_.integer<int>(0, 6)) {
      case 0: out = exp(a); break;
      case 1: out = exp2(a); break;
      case 2: out = log(a); break;
      case 3: out = log2(a); break;
      case 4: out = sqrt(a); break;
      case 5: out = rsqrt(a); break;
      default: out = abs(a); break;
      }
      break;
    }
    case Call::Cast: out = slot().to(dtype()); break;
    case Call::Arange: {
      const int64_t lo = small_int();
      out = arange(lo, lo + dim());
      break;
    }
    case Call::Full: out = full(shape(), in_.pick({0.0, 1.0, -2.5, 65504.0, 1e40}), dtype()); break;
    case Call::ProgramId: out = in_.boolean() ? program_id(axis()) : num_programs(axis()); break;
    case Call::ExpandDims: out = slot().expand_dims(axis()); break;
    case Call::Trans: out = slot().trans(); break;
    case Call::Reshape: out = slot().reshape(shape()); break;
    case Call::BroadcastTo: out = slot().broadcast_to(shape()); break;
    case Call::Reduce: {
      const Value& a = slot();
      const int ax = axis();
      const bool keepdims = in_.boolean();
      switch (in_.integer<int>(0, 3)) {
      case 0: out = sum(a, ax, keepdims); break;
      case 1: out = max(a, ax, keepdims); break;
      case 2: out = min(a, ax, keepdims); break;
      default: out = argmax(a, ax, keepdims); break;
      }
      break;
    }
    case Call::Dot: {
      const Value &a = slot(), &b = slot();
      out = in_.boolean() ? dot(a, b) : dot(a, b, slot(), in_.boolean());
      break;
    }
    case Call::Where: {
      const Value &c = slot(), &a = slot(), &b = slot();
      out = where(c, a, b);
      break;
    }
    case Call::Load: {
      const Value &offsets = slot(), &mask = slot();
      out = load(x_ + offsets, mask, literal());
      break;
    }
    case Call::Store: {
      const Value &offsets = slot(), &value = slot(), &mask = slot();
      store(y_ + offsets, value, mask);
      break;
    }
    case Call::AtomicAdd: {
      const Value &offsets = slot(), &value = slot(), &mask = slot();
      out = atomic_add(y_ + offsets, value, mask);
      break;
    }
    case Call::BlockLoad: out = load(block_ptr(x_), boundary_check(), in_.boolean() ? Padding::Zero : Padding::NaN); break;
    case Call::BlockStore: {
      const Value ptr = block_ptr(y_);
      store(ptr, slot(), boundary_check());
      break;
    }
    case Call::BlockAtomicAdd: {
      const Value ptr = block_ptr(y_);
      atomic_add(ptr, slot(), boundary_check());
      break;
    }
    case Call::Loop:
    case Call::Branch:
      break; // control_flow()
    }
  }

  // A (rows, cols) window of a row-major 16 x 16 view of `base` (256 elements), maybe advanced.
  Value block_ptr(const Value& base) {
    const int64_t rows = small_int(), cols = small_int();
    const llvm::SmallVector<int, 2> order = in_.boolean() ? llvm::SmallVector<int, 2>{1, 0}
                                                              : llvm::SmallVector<int, 2>{0, 1};
    Value ptr = make_block_ptr(base, {Operand(rows), Operand(cols)}, {Operand(int64_t{16}), Operand(int64_t{1})},
                               {Operand(small_int()), Operand(small_int())}, {dim(), dim()}, order);
    if (in_.boolean())
      ptr = advance(ptr, {Operand(small_int()), Operand(small_int())});
    return ptr;
  }
  BoundaryCheck boundary_check() {
    switch (in_.integer<int>(0, 3)) {
    case 0: return {};
    case 1: return {0};
    case 2: return {1};
    default: return {0, 1};
    }
  }

  kiln::fuzz::FuzzInput& in_;
  Value x_, y_;
  std::array<Value, kSlots> slots_;
  int calls_ = 0;
};

Kernel build_program(kiln::fuzz::FuzzInput& in) {
  KernelBuilder kb("fuzz");
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32), n = kb.arg("n", i32);
  {
    ProgramBuilder program(in, x, y, n);
    program.calls(0);
  }
  return kb.finish();
}

void run_program(const Kernel& k, int64_t programs) {
  HostBuffer x(f32, kBufferElements, "x"), y(f32, kBufferElements, "y");
  for (int64_t i = 0; i < kBufferElements; ++i)
    x.set(i, static_cast<double>(i % 17) - 8);
  interpret(k, Grid{programs, 1, 1}, {InterpArg::ptr(x), InterpArg::ptr(y), InterpArg::of_int(kN)});
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::FuzzInput in(data, size);
  const int64_t programs = in.integer<int64_t>(1, 2);
  try {
    const Kernel k = build_program(in);
    (void)print_kernel(k);
    run_program(k, programs);
  } catch (const Error&) {
    // refused: a program kiln does not accept, or one that reads or writes outside x or y
  }
  return 0;
}
