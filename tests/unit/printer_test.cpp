// The IR printer: stable text, structured control flow, value names, call sites, and the
// attributes of every op kind. Substring checks, not golden files.
#include "dsl/dsl.h"
#include "dsl/printer.h"

#include <gtest/gtest.h>

#include <regex>

using namespace kiln;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A kernel that uses every op kind (and a for with an if inside), so that one print shows them all.
// `line_of_neg` receives the line of the unary minus, to check call sites.
Kernel every_op_kernel(unsigned* line_of_neg = nullptr) {
  KernelBuilder kb("every_op", Config().set("BLOCK", 32));
  Value a = kb.arg_ptr("a", f16), out = kb.arg_ptr("out", f32), counts = kb.arg_ptr("counts", i32);
  Value n = kb.arg("n", i32);
  Value pid = program_id(1), np = num_programs(2);
  Value rows = arange(0, 32).expand_dims(1);                  // (32, 1) i32
  Value cols = arange(0, 32).expand_dims(0);                  // (1, 32) i32
  Value mask = (rows < n) && (cols < n);                      // (32, 32) i1
  Value tile = load(a + rows * 32 + cols, mask, 0.0f);        // (32, 32) f16
  Value bp = make_block_ptr(a, {n, n}, {n, 1}, {pid * 32, np}, {32, 32}, {1, 0});
  Value acc = zeros({32, 32}, f32).named("acc");
  for_range(0, n, 32, [&](Value k) {
    Value blk = load(bp, {0, 1}, Padding::NaN);               // (32, 32) f16
    acc = dot(tile, trans(blk), acc, false);
    if_(k > 64, [&] { acc = acc * 0.5f; });
    bp = advance(bp, {0, 32});
  });
  Value neg = -acc; if (line_of_neg) *line_of_neg = __LINE__;
  Value e = exp(neg).reshape({1024}).reshape({32, 32});
  Value m = max(e, 1, /*keepdims=*/true);                     // (32, 1) f32
  Value am = argmax(e, 0);                                    // (32,) i32
  Value am_f = am.to(f32);                                    // (32,) f32
  Value picked = where(mask, e - m, 0.0f);
  Value out_bp = make_block_ptr(out, {n, n}, {n, 1}, {0, 0}, {32, 32}, {1, 0});
  store(out_bp, picked, {1});
  atomic_add(out_bp, picked, {0, 1});
  atomic_add(counts + arange(0, 32), am, am > 0);
  store(out + arange(0, 32), sum(picked, 0), arange(0, 32) < n);
  store(out + arange(0, 32) + 32, m.reshape({32}));
  store(out + arange(0, 32) + 64, am_f);
  store(out + arange(0, 32) + 96, kiln::rand(n, arange(0, 32)));
  store(out + arange(0, 32) + 128, cumsum(kiln::fma(am_f, am_f, 1.0f), 0, /*reverse=*/true));
  store(out + arange(0, 32) + 160, sort(am_f, 0, /*descending=*/true));
  return kb.finish();
}

// associative_scan's combine is printed inside the scan, as a body over its two arguments, so that the
// printed IR (which keys caches and tuning) tells two combines apart; cumprod and prod print like their
// siblings.
TEST(Printer, AssociativeScanPrintsItsCombine) {
  KernelBuilder kb("combine");
  Value x = kb.arg_ptr("x", i32);
  Value offs = arange(0, 16);
  Value v = load(x + offs);
  store(x + offs, associative_scan(
                      v, 0, [](Value a, Value b) { return where(a > b, a, b + 1); }, true));
  store(x + offs, cumprod(v, 0) + prod(v, 0));
  const std::string ir = print_kernel(kb.finish());
  EXPECT_TRUE(std::regex_search(
      ir, std::regex(R"(scan combine axis=0 reverse %\d+ : tensor<16xi32> combine\((%a\d+), (%b\d+)\) \{)")))
      << ir;
  EXPECT_TRUE(std::regex_search(ir, std::regex(R"(\n    %\d+ = binary gt %a\d+, %b\d+ : i1)"))) << ir;
  EXPECT_TRUE(has(ir, "constant 1 : i32")) << ir;
  EXPECT_TRUE(std::regex_search(ir, std::regex(R"(\n    yield %\d+ +// )"))) << ir;
  EXPECT_TRUE(std::regex_search(ir, std::regex(R"(scan prod axis=0 %\d+ : tensor<16xi32>)"))) << ir;
  EXPECT_TRUE(std::regex_search(ir, std::regex(R"(reduce prod axis=0 %\d+ : i32)"))) << ir;
  EXPECT_TRUE(has(print_kernel(every_op_kernel()), "sort axis=0 descending %")) << ir;
}

TEST(Printer, SameKernelPrintsTheSameTwice) {
  Kernel k = every_op_kernel();
  EXPECT_EQ(print_kernel(k), print_kernel(k));
}

TEST(Printer, TwoBuildsPrintTheSame) {
  std::string first = print_kernel(every_op_kernel());
  std::string second = print_kernel(every_op_kernel());
  EXPECT_EQ(first, second);
}

TEST(Printer, EveryOpKindAppears) {
  std::string ir = print_kernel(every_op_kernel());
  for (int kind = 0; kind <= static_cast<int>(OpKind::Yield); ++kind) {
    std::string name(op_name(static_cast<OpKind>(kind)));
    EXPECT_TRUE(has(ir, " " + name + " ") || has(ir, " " + name + "\n") || has(ir, "= " + name))
        << "op " << name << " is not printed\n" << ir;
  }
}

TEST(Printer, OpAttributes) {
  std::string ir = print_kernel(every_op_kernel());
  EXPECT_TRUE(has(ir, "program_id axis=1 : i32")) << ir;
  EXPECT_TRUE(has(ir, "num_programs axis=2 : i32")) << ir;
  EXPECT_TRUE(has(ir, "arange 0, 32 : tensor<32xi32>")) << ir;
  EXPECT_TRUE(has(ir, "expand_dims axis=1")) << ir;
  EXPECT_TRUE(has(ir, "expand_dims axis=0")) << ir;
  EXPECT_TRUE(has(ir, "constant 0.5 : f32")) << ir;
  EXPECT_TRUE(has(ir, "unary neg")) << ir;
  EXPECT_TRUE(has(ir, "unary exp")) << ir;
  EXPECT_TRUE(has(ir, "binary and")) << ir;
  EXPECT_TRUE(has(ir, "binary lt")) << ir;
  std::smatch m;
  EXPECT_TRUE(std::regex_search(ir, m, std::regex(R"(reduce max axis=1 keepdims %\d+ : tensor<32x1xf32>)"))) << ir;
  EXPECT_TRUE(std::regex_search(ir, m, std::regex(R"(reduce sum axis=0 %\d+ : tensor<32xf32>)"))) << ir;
  EXPECT_TRUE(std::regex_search(ir, m, std::regex(R"(argmax axis=0 %\d+ : tensor<32xi32>)"))) << ir;
  EXPECT_TRUE(has(ir, "load masked")) << ir;
  EXPECT_TRUE(has(ir, "store masked")) << ir;
  EXPECT_TRUE(has(ir, "atomic_add masked")) << ir;
  EXPECT_TRUE(has(ir, "load_block boundary_check=[0,1] padding=nan")) << ir;
  EXPECT_TRUE(has(ir, "store_block boundary_check=[1]")) << ir;
  EXPECT_TRUE(has(ir, "atomic_add_block boundary_check=[0,1]")) << ir;
  EXPECT_TRUE(has(ir, ": block_ptr<32x32xf16, order=1,0>")) << ir;
  EXPECT_TRUE(has(ir, "trans %")) << ir;
  EXPECT_TRUE(has(ir, "reshape %")) << ir;
  EXPECT_TRUE(has(ir, ": tensor<1024xf32>")) << ir;
  EXPECT_TRUE(has(ir, "cast %")) << ir;
  EXPECT_TRUE(has(ir, "dot %")) << ir;
  EXPECT_TRUE(has(ir, "addptr %")) << ir;
  EXPECT_TRUE(has(ir, "rand uniform %")) << ir;
  EXPECT_TRUE(std::regex_search(ir, m, std::regex(R"(fma %\d+, %\d+, %\d+ : tensor<32xf32>)"))) << ir;
  EXPECT_TRUE(std::regex_search(ir, m, std::regex(R"(scan sum axis=0 reverse %\d+ : tensor<32xf32>)"))) << ir;
}

TEST(Printer, Tf32AndZeroPaddingAttributes) {
  KernelBuilder kb("tf32");
  Value p = kb.arg_ptr("p", f32);
  Value bp = make_block_ptr(p, {64, 64}, {64, 1}, {0, 0}, {16, 16}, {1, 0});
  Value t = load(bp);
  Value d = dot(t, t, zeros({16, 16}, f32), /*tf32=*/true);
  store(bp, d);
  std::string ir = print_kernel(kb.finish());
  EXPECT_TRUE(has(ir, "dot tf32 %")) << ir;
  EXPECT_TRUE(has(ir, "load_block boundary_check=[] padding=zero")) << ir;
  EXPECT_TRUE(has(ir, "store_block boundary_check=[] %")) << ir;
}

TEST(Printer, ForAndIfStructure) {
  std::string ir = print_kernel(every_op_kernel());
  std::smatch m;
  EXPECT_TRUE(std::regex_search(ir, m, std::regex(R"(= for %i\d+ = %\d+ to %n\d+ step %\d+ iter_args\()")))
      << "a for with its bounds and carried values\n" << ir;
  EXPECT_TRUE(std::regex_search(ir, m, std::regex(R"(%acc\d+ = %acc\d+)"))) << "iter_args name the carried acc\n" << ir;
  EXPECT_TRUE(std::regex_search(ir, m, std::regex(R"(\n    %\d+ = if %\d+ \{)"))) << "an if with one result\n" << ir;
  EXPECT_TRUE(has(ir, "} else {")) << ir;
  EXPECT_TRUE(has(ir, "yield %")) << ir;
  // The body is indented one level deeper than the for, the if's body deeper still.
  EXPECT_TRUE(std::regex_search(ir, m, std::regex(R"(\n    %\w+ = load_block)"))) << ir;
  EXPECT_TRUE(std::regex_search(ir, m, std::regex(R"(\n      %\w+ = binary mul)"))) << ir;
}

TEST(Printer, NamesAndParameters) {
  std::string ir = print_kernel(every_op_kernel());
  EXPECT_TRUE(has(ir, "kernel @every_op(%a0: ptr<f16>, %out1: ptr<f32>, %counts2: ptr<i32>, %n3: i32) {")) << ir;
  EXPECT_TRUE(has(ir, "// config: BLOCK=32 num_warps=4 num_stages=2")) << ir;
  std::smatch m;
  EXPECT_TRUE(std::regex_search(ir, m, std::regex(R"(%acc\d+ = constant 0 : tensor<32x32xf32>)"))) << ir;
}

TEST(Printer, CallSitesAreTheUsersLines) {
  unsigned line = 0;
  std::string ir = print_kernel(every_op_kernel(&line));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(ir, m, std::regex(R"(unary neg [^\n]*// ([\w.]+):(\d+))"))) << ir;
  EXPECT_EQ(m[1].str(), "printer_test.cpp");
  EXPECT_EQ(m[2].str(), std::to_string(line)) << "unary minus records the user's line";
  for (const char* op : {"dot", "load_block", "for", "store_block"}) {
    ASSERT_TRUE(std::regex_search(ir, m, std::regex(std::string(op) + R"( [^\n]*// ([\w.]+):\d+)"))) << op;
    EXPECT_EQ(m[1].str(), "printer_test.cpp") << op;
  }
}

TEST(Printer, ValueNameHelper) {
  KernelBuilder kb("names");
  Value x = arange(0, 16);
  Value y = arange(0, 16).named("offs");
  EXPECT_EQ(value_name(kb.kernel(), x.id()), "%" + std::to_string(x.id()));
  EXPECT_EQ(value_name(kb.kernel(), y.id()), "%offs" + std::to_string(y.id()));
}

} // namespace
