// The mod-spec parser (kernels/attention/attention_mod_spec.h) that `kiln attention --mod` and the C ABI's
// kiln_attention_options.mods share: a ';'-separated list builds the same mods as the library's C++ calls,
// in order, with the tensors they read; blanks and empty specs are ignored.
#include "kernels/attention/attention_mod_library.h"
#include "kernels/attention/attention_mod_spec.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

std::vector<std::string> tensor_names(const ModSpecs& s) {
  std::vector<std::string> out;
  for (const ModTensorSpec& t : s.tensors)
    out.push_back(t.name);
  return out;
}

TEST(AttentionModSpec, ListBuildsTheLibraryModsInOrder) {
  const ModSpecs parsed = parse_mod_specs(" sliding_window=128,0 ; softcap=30;alibi;document;sinks;");
  AttentionMods built;
  built.mask = {sliding_window(128, 0), document_mask()};
  built.score = {softcap(30), alibi()};
  built.sink = {attention_sinks()};
  EXPECT_EQ(parsed.mods.name(), built.name());
  EXPECT_EQ(parsed.mods.identity_key(), built.identity_key());
  EXPECT_EQ(tensor_names(parsed), (std::vector<std::string>{"alibi_slopes", "q_doc", "kv_doc", "sinks"}));
}

TEST(AttentionModSpec, EmptyListIsNoMods) {
  for (const char* text : {"", " ", ";", " ; ;"}) {
    const ModSpecs s = parse_mod_specs(text);
    EXPECT_TRUE(s.mods.empty()) << text;
    EXPECT_TRUE(s.tensors.empty()) << text;
  }
}

TEST(AttentionModSpec, EachSpellingOfOneMod) {
  struct Case {
    const char* spec;
    std::string name;
  };
  for (const Case& c : {Case{"causal", "|causal_top_left"}, Case{"causal=top-left", "|causal_top_left"},
                        Case{"causal=bottom-right", "|causal_bottom_right"},
                        Case{"sliding_window=64", "|sliding_window(64,0)"}, Case{"prefix_lm=256", "|prefix_lm(256)"},
                        Case{"softcap=30", "softcap(30)|"}, Case{"bias", "bias(f32)|"},
                        Case{"bias=bf16", "bias(bf16)|"}}) {
    AttentionMods m;
    add_mod_spec(m, c.spec);
    EXPECT_EQ(m.name(), c.name) << c.spec;
  }
}

TEST(AttentionModSpec, HelpListsEveryMod) {
  const std::string help = mod_spec_help();
  for (const char* name : {"causal", "sliding_window", "prefix_lm", "softcap", "alibi", "document", "bias", "sinks"})
    EXPECT_NE(help.find(name), std::string::npos) << name;
}

} // namespace
