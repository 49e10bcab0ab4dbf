// Shared checks for the error tests: each test runs one bad DSL program and asserts that it raises a
// kiln::Error (not an InternalError, not a crash) whose message names the mistake and carries the
// test's own call site as "<file>.cpp:<line>".
#pragma once

#include "support/error.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <source_location>
#include <string>

namespace kiln_test {

// The message of the kiln::Error that `bad` throws; a test failure (and "") when it throws nothing,
// an InternalError or anything else.
inline std::string user_error(const std::function<void()>& bad) {
  try {
    bad();
  } catch (const kiln::InternalError& e) {
    ADD_FAILURE() << "expected a kiln::Error (a user mistake), got an InternalError: " << e.what();
    return "";
  } catch (const kiln::Error& e) {
    if (std::getenv("KILN_SHOW_ERRORS")) // to read every message while reviewing them
      std::fprintf(stderr, "  kiln::Error: %s\n", e.what());
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a kiln::Error, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected a kiln::Error, but nothing was thrown";
  return "";
}

// Every one of `parts` occurs in `message`.
inline void expect_mentions(const std::string& message, std::initializer_list<std::string> parts,
                            std::source_location here = std::source_location::current()) {
  for (const std::string& p : parts)
    EXPECT_NE(message.find(p), std::string::npos)
        << "message lacks \"" << p << "\"\n  message: " << message << "\n  (checked at line " << here.line() << ")";
}

// The message names the caller's file (without directories) and `line`, as "file.cpp:line".
inline void expect_call_site(const std::string& message, unsigned line,
                             std::source_location here = std::source_location::current()) {
  const char* slash = std::strrchr(here.file_name(), '/');
  std::string site = std::string(slash ? slash + 1 : here.file_name()) + ":" + std::to_string(line);
  EXPECT_NE(message.find(site), std::string::npos) << "message lacks the call site " << site << "\n  message: " << message;
}

} // namespace kiln_test
