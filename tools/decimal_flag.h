// Integer command-line flags read in base 10 only. llvm::cl's own integer parser guesses the radix from the
// prefix, so "--seq-q 016" was octal 14, "--head-dim 09" invalid and "0x10" 16; kiln reads every number on
// its command line as decimal ("016" is 16) and refuses anything else, naming the flag.
#pragma once

#include <llvm/Support/CommandLine.h>

namespace kiln::cli {

template <typename T> class DecimalParser : public llvm::cl::parser<T> {
public:
  using llvm::cl::parser<T>::parser;

  // Hides parser<T>::parse (llvm::cl calls the parser type it is given, not through a virtual). True on
  // error.
  bool parse(llvm::cl::Option& option, llvm::StringRef, llvm::StringRef arg, T& value) {
    if (arg.trim().getAsInteger(10, value))
      return option.error("expected a base-10 integer that fits its type, got '" + arg + "'");
    return false;
  }
};

// LLVM's parsers of long and unsigned long are final: int64_t and uint64_t flags hold the (same-sized) long
// long and unsigned long long instead.
template <typename T> struct DecimalStorage { using type = T; };
template <> struct DecimalStorage<long> { using type = long long; };
template <> struct DecimalStorage<unsigned long> { using type = unsigned long long; };

// An integer flag, e.g. DecimalFlag<int64_t> batch("batch", cl::desc(...), ...).
template <typename T>
using DecimalFlag =
    llvm::cl::opt<typename DecimalStorage<T>::type, false, DecimalParser<typename DecimalStorage<T>::type>>;

} // namespace kiln::cli
