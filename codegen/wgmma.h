// Hopper warpgroup MMA (wgmma.mma_async, sm_90a): which dots lower to it, how their shared-memory
// operand tiles are described to the tensor cores, and the device code of each instruction shape.
//
// A warpgroup (4 consecutive warps) computes an m64nNk16 product per instruction, reading B (and A,
// unless A is in registers) straight from shared memory through a 64-bit matrix descriptor. kiln's
// shared tiles are already stored the way the descriptors want (emit_cuda.cpp: 128-byte column
// panels, Hopper's XOR swizzle, 1024-byte aligned bases), and the mma layouts interleave warps at
// 16-row granularity (layout.cpp), so a wgmma accumulator is the same register layout as mma.sync's:
// the rest of the kernel does not know which instruction produced it.
#pragma once

#include "codegen/assign_layouts.h"
#include "codegen/target.h"

#include <cstdint>
#include <optional>
#include <string>

namespace kiln {

// wgmma's 64-bit shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): the start address,
// leading and stride byte offsets, each in 16-byte units in 14 bits, and the swizzle mode. The device code
// builds the same bits at run time (kiln::wgmma_desc, whose start address is only known there); this is
// the host's typed view of them, for printing and for checking the encoding.
struct WgmmaDescriptor {
  uint32_t start_address = 0;      // shared-memory byte address (bits 0-13 hold (address & 0x3FFFF) >> 4)
  int64_t leading_byte_offset = 0; // bits 16-29, >> 4
  int64_t stride_byte_offset = 0;  // bits 32-45, >> 4
  SwizzleMode swizzle = SwizzleMode::Bytes128;

  uint64_t bits() const;
  std::string str() const; // "LBO 16 B, SBO 1024 B, 128-byte swizzle"
};

// How wgmma reads one shared operand tile.
struct WgmmaOperand {
  bool k_major = true; // the tile's contiguous dim is the dot's K dim
  SwizzleMode swizzle_mode = SwizzleMode::Bytes128;
  int64_t line_bytes = 128; // bytes of one swizzled line (the swizzle width)
  int64_t lbo = 0, sbo = 0; // the descriptor's leading / stride byte offsets
  int64_t panel_bytes = 0;  // bytes between 128-byte column panels (rows * 128), 0 with one panel
  int elem_bytes = 2;

  // Bytes from the tile's start to the element at K index k (a multiple of 16).
  int64_t k_offset(int64_t k) const;
  // Bytes per step of the M/N index, valid at multiples of mn_granule() (8 rows when K-major, one
  // line when M/N-major).
  int64_t mn_stride() const;
  int64_t mn_granule() const { return k_major ? 8 : line_bytes / elem_bytes; }
  // The descriptor of this operand at shared-memory address `start` (the tile's base for printing).
  WgmmaDescriptor descriptor(uint32_t start = 0) const { return {start, lbo, sbo, swizzle_mode}; }
};

// The descriptor geometry of `t` read as a wgmma operand whose K dim is (or is not) the tile's
// contiguous dim; nullopt when the tile's lines are not 32, 64 or 128 bytes.
std::optional<WgmmaOperand> wgmma_operand(const SharedTile& t, bool k_major);

// Whether the target and options allow wgmma at all (sm_90a, tensor cores, swizzled tiles).
bool wgmma_enabled(const Target& target, const CodegenOptions& options);

// Whether `dot` lowers to wgmma under `plan`; when not, `why` (if given) says what prevents it.
bool dot_uses_wgmma(const Kernel& k, const Op& dot, const LoweringPlan& plan, const Target& target,
                    const CodegenOptions& options, std::string* why = nullptr);

// A pipelined loop whose only product is an accumulating wgmma chain (acc = dot(a, b, acc), acc used
// by nothing else in the body, as in a matmul's k loop) need not wait for each product: one group
// stays in flight while the next tiles are waited for and issued, keeping the tensor cores fed. The
// price is one stage of the ring: the tile a product in flight reads must not be overwritten, so
// loads run num_stages - 2 iterations ahead (num_stages >= 3). Returns that dot, or nullptr.
const Op* deferred_wgmma_dot(const Kernel& k, const Op& loop, const LoweringPlan& plan, const Target& target,
                             const CodegenOptions& options);

// Device helpers every wgmma kernel uses (fences, commit/wait, the descriptor encoder): the text of
// codegen/prelude/kiln_wgmma.cuh.
std::string wgmma_support_source();
// The name and the definition of the device function issuing one
// wgmma.mma_async.m64n{n}k16.f32.{in}.{in} with A from registers (4 x b32) or a descriptor. With `zero_acc` it
// writes D = A B without reading D (scale-d false): a product's first k step onto a zero accumulator, whose
// registers then need no zeros first (which ptxas may share with another product's in flight, and then wait).
std::string wgmma_function_name(int n, DType in, bool a_in_registers, bool trans_a, bool trans_b, bool zero_acc = false);
std::string wgmma_function_source(int n, DType in, bool a_in_registers, bool trans_a, bool trans_b,
                                  bool zero_acc = false);

} // namespace kiln
