// The wgmma operand geometry (descriptor strides and start-address steps) for the tile shapes kiln
// stores, checked against the shared-memory layout the emitter writes (emit_cuda.cpp: 128-byte
// column panels, 8-row swizzle atoms).
#include "codegen/wgmma.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

SharedTile tile(int64_t rows, int64_t cols, int elem_bytes = 2) {
  SharedTile t;
  t.rows = rows;
  t.cols = cols;
  t.elem_bytes = elem_bytes;
  return t;
}

TEST(Wgmma, KMajorTileOfOneLine) {
  // Q or K tile (64 rows, D = 64 f16): 128-byte lines, one panel.
  auto o = wgmma_operand(tile(64, 64), /*k_major=*/true);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->swizzle_mode, SwizzleMode::Bytes128);
  EXPECT_EQ(o->line_bytes, 128);
  EXPECT_EQ(o->sbo, 1024) << "8 rows of 128 bytes between swizzle atoms";
  EXPECT_EQ(o->lbo, 16) << "unused for swizzled K-major layouts (PTX: assumed 1)";
  EXPECT_EQ(o->k_offset(0), 0);
  EXPECT_EQ(o->k_offset(16), 32) << "16 f16 along the line";
  EXPECT_EQ(o->k_offset(48), 96);
  EXPECT_EQ(o->mn_stride(), 128) << "one row per M/N step";
  EXPECT_EQ(o->mn_granule(), 8);
}

TEST(Wgmma, KMajorTileOfTwoPanels) {
  // D = 128 f16: 256-byte rows stored as two 128-byte panels of all 64 rows each.
  auto o = wgmma_operand(tile(64, 128), true);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->panel_bytes, 64 * 128);
  EXPECT_EQ(o->k_offset(48), 96);
  EXPECT_EQ(o->k_offset(64), 64 * 128) << "k = 64 starts the second panel";
  EXPECT_EQ(o->k_offset(80), 64 * 128 + 32);
}

TEST(Wgmma, MNMajorTile) {
  // V tile (64 keys = K, D = 128 = N contiguous): K walks rows, N walks 128-byte panels.
  auto o = wgmma_operand(tile(64, 128), /*k_major=*/false);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->lbo, 64 * 128) << "leading offset: from one N panel to the next";
  EXPECT_EQ(o->sbo, 1024) << "stride offset: from 8 rows of K to the next 8";
  EXPECT_EQ(o->k_offset(16), 16 * 128);
  EXPECT_EQ(o->mn_granule(), 64);
  EXPECT_EQ(o->mn_stride() * 64, 64 * 128) << "64 columns = one panel";
}

TEST(Wgmma, ATileNarrowedTo64ByteLinesIsTwoPanelsEitherWay) {
  // K's tile of the fused backward at D = 64 (128 keys x 64 f16) in 64-byte lines (choose_dot_lowering).
  SharedTile k = tile(128, 64);
  k.line_cap = 64;
  auto n_major = wgmma_operand(k, /*k_major=*/false); // dQ = dS K: N = D, one warpgroup's 32 columns a panel
  ASSERT_TRUE(n_major);
  EXPECT_EQ(n_major->swizzle_mode, SwizzleMode::Bytes64);
  EXPECT_EQ(n_major->lbo, 128 * 64) << "leading offset: one 32-column panel to the next";
  EXPECT_EQ(n_major->sbo, 512) << "8 rows of K of 64 bytes";
  EXPECT_EQ(n_major->mn_granule(), 32);
  EXPECT_EQ(n_major->mn_stride() * 32, 128 * 64) << "the second warpgroup's columns start the second panel";
  EXPECT_EQ(n_major->k_offset(16), 16 * 64);
  auto k_major = wgmma_operand(k, /*k_major=*/true); // Sᵀ = K Qᵀ: K = D across the two panels
  ASSERT_TRUE(k_major);
  EXPECT_EQ(k_major->sbo, 512);
  EXPECT_EQ(k_major->k_offset(16), 32);
  EXPECT_EQ(k_major->k_offset(32), 128 * 64) << "k = 32 starts the second panel";
  EXPECT_EQ(k_major->k_offset(48), 128 * 64 + 32);
}

TEST(Wgmma, NarrowLinesUseNarrowerSwizzles) {
  auto o64 = wgmma_operand(tile(64, 32), true); // D = 32 f16: 64-byte lines
  ASSERT_TRUE(o64);
  EXPECT_EQ(o64->swizzle_mode, SwizzleMode::Bytes64);
  EXPECT_EQ(o64->sbo, 512);
  EXPECT_EQ(o64->k_offset(16), 32);
  auto o32 = wgmma_operand(tile(64, 16), true);
  ASSERT_TRUE(o32);
  EXPECT_EQ(o32->swizzle_mode, SwizzleMode::Bytes32);
  EXPECT_FALSE(wgmma_operand(tile(64, 8), true)) << "16-byte lines have no swizzle mode";
  EXPECT_FALSE(wgmma_operand(tile(12, 64), true)) << "rows must fill 8-row atoms";
}

TEST(Wgmma, EnabledOnlyOnSm90a) {
  CodegenOptions on;
  EXPECT_TRUE(wgmma_enabled(Target::parse("sm_90a"), on));
  EXPECT_FALSE(wgmma_enabled(Target::parse("sm_90"), on));
  EXPECT_FALSE(wgmma_enabled(Target::parse("sm_80"), on));
  CodegenOptions off = on;
  off.wgmma = false;
  EXPECT_FALSE(wgmma_enabled(Target::parse("sm_90a"), off));
  off = on;
  off.swizzle = false;
  EXPECT_FALSE(wgmma_enabled(Target::parse("sm_90a"), off)) << "descriptors need the swizzled layout";
}

TEST(Wgmma, FunctionTextNamesTheShape) {
  std::string rs = wgmma_function_source(64, DType::f16, /*a_in_registers=*/true, false, /*trans_b=*/true);
  EXPECT_NE(rs.find("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"), std::string::npos);
  EXPECT_NE(rs.find("float (&d)[32]"), std::string::npos) << "n / 2 accumulators per thread";
  EXPECT_NE(rs.find("\"+f\"(d[31])"), std::string::npos);
  EXPECT_EQ(rs.find("\"+f\"(d[32])"), std::string::npos);
  std::string ss = wgmma_function_source(256, DType::bf16, false, true, false);
  EXPECT_NE(ss.find("m64n256k16.f32.bf16.bf16"), std::string::npos);
  EXPECT_NE(ss.find("p, 1, 1, 1, 0;"), std::string::npos) << "trans-a 1, trans-b 0";
  EXPECT_EQ(wgmma_function_name(256, DType::bf16, false, true, false), "kiln_wgmma_m64n256k16_bf16_ss_ta");
}

// The descriptor's bits as the PTX ISA lays them out: start address >> 4 in bits 0-13 (of an 18-bit
// shared address), LBO >> 4 in 16-29, SBO >> 4 in 32-45, the swizzle mode in 62-63; the same formula as the
// device's kiln::wgmma_desc.
TEST(Wgmma, DescriptorBitsFollowThePtxLayout) {
  WgmmaDescriptor d{0x12340, 16, 1024, SwizzleMode::Bytes128};
  EXPECT_EQ(d.bits(), (uint64_t{0x1234}) | (uint64_t{1} << 16) | (uint64_t{64} << 32) | (uint64_t{1} << 62));
  d.start_address = 0x7FFF0 | 0x40000; // bits past the 18-bit window are dropped
  d.swizzle = SwizzleMode::Bytes32;
  EXPECT_EQ(d.bits() & 0x3FFF, uint64_t{0x3FFF});
  EXPECT_EQ(d.bits() >> 62, uint64_t{3});
  EXPECT_EQ(d.str(), "LBO 16 B, SBO 1024 B, 32-byte swizzle");
  // An operand's descriptor carries its geometry: 64 rows of 64 f16 (one 128-byte line), K-major.
  SharedTile t;
  t.rows = 64;
  t.cols = 64;
  std::optional<WgmmaOperand> o = wgmma_operand(t, true);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->descriptor().str(), "LBO 16 B, SBO 1024 B, 128-byte swizzle");
}

} // namespace
} // namespace kiln
