// The autotuner's finalists (runtime/autotuner.h): the candidates within 10 % of the best after the first pass,
// timed again in rounds whose orders differ, each scoring the median of its times. An injected timer stands in for
// the GPU (unit/fake_tuning.h), so the order of the timings and the scores are checked exactly.
#include "runtime/autotuner.h"
#include "unit/fake_tuning.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

using namespace kiln;
using namespace kiln::rt;
using namespace kiln::testing_support;

namespace {

// How many timings a tuning of two candidates 1 % apart takes under `options`.
int timings_of_two_close_candidates(const AutotunerOptions& options) {
  FakeKernel close;
  close.add("A", 1.0).add("B", 1.01);
  Autotuner tuner("", options);
  tuner.tune(close.request(), close.hooks());
  return close.timed;
}

// A GPU's speed drifts during a run (warming up, throttling at its power limit), so the candidates within 10 %
// of the best are timed again and each scores the median of its times. With one round (the tuner before worklog
// §98), the finalists run last-timed first and each scores the mean of its two times: a close second that the
// first pass timed slow wins when its mean is the best; far candidates are not timed again; a single finalist is
// not either.
// k's hooks, with each timing's id appended to `order`, and a candidate timed a second time taking its time from
// `second` where it is there (else its first time again).
TuneHooks retimed_hooks(FakeKernel& k, const std::map<std::string, double>& second,
                        std::vector<std::string>& order) {
  TuneHooks h = k.hooks();
  h.time = [&k, &second, &order, first = h.time](size_t i) {
    const std::string& id = k.ids[i];
    const bool again = std::count(order.begin(), order.end(), id) > 0;
    order.push_back(id);
    TimeOutcome t = first(i);
    if (auto it = second.find(id); again && it != second.end())
      t.ms = it->second;
    return t;
  };
  return h;
}

AutotunerOptions one_round() {
  AutotunerOptions o = quiet();
  o.finalist_rounds = 1;
  return o;
}

TEST(Autotuner, OneRoundTimesTheFinalistsAgainInReverseAndScoresTheirMeanTime) {
  FakeKernel k;
  k.add("A", 1.00).add("B", 1.06).add("C", 1.50).add("D", 1.04);
  const std::map<std::string, double> second = {{"A", 1.02}, {"B", 0.90}, {"D", 1.02}};
  std::vector<std::string> order;
  Autotuner tuner("", one_round());
  TuneResult r = tuner.tune(k.request(), retimed_hooks(k, second, order));
  EXPECT_EQ(order, (std::vector<std::string>{"A", "B", "C", "D", "D", "B", "A"}));
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(k.ids[*r.best], "B");
  EXPECT_DOUBLE_EQ(r.best_ms, 0.98);
  EXPECT_DOUBLE_EQ(row(r, "A").ms, 1.01);
  EXPECT_DOUBLE_EQ(row(r, "D").ms, 1.03);
  EXPECT_DOUBLE_EQ(row(r, "C").ms, 1.50);
  EXPECT_EQ(row(r, "B").samples, 2) << "a finalist's score is the mean of its two timings";
  EXPECT_EQ(row(r, "C").samples, 1) << "too far behind to be timed again";

  // Up to six finalists: the fifth of the first pass is timed again, and wins on its mean.
  FakeKernel many;
  many.add("A", 1.00).add("B", 1.02).add("C", 1.03).add("D", 1.04).add("E", 1.05).add("F", 1.30);
  const std::map<std::string, double> e_faster = {{"E", 0.90}};
  std::vector<std::string> timed;
  Autotuner six("", one_round());
  TuneResult m = six.tune(many.request(), retimed_hooks(many, e_faster, timed));
  EXPECT_EQ(timed, (std::vector<std::string>{"A", "B", "C", "D", "E", "F", "E", "D", "C", "B", "A"}));
  ASSERT_TRUE(m.best.has_value());
  EXPECT_EQ(many.ids[*m.best], "E");

  // One finalist, or the second pass switched off: each candidate is timed once.
  FakeKernel alone;
  alone.add("A", 1.0).add("B", 2.0);
  Autotuner single("", quiet());
  single.tune(alone.request(), alone.hooks());
  EXPECT_EQ(alone.timed, 2);
  AutotunerOptions no_finalists = quiet();
  no_finalists.finalists = 0;
  EXPECT_EQ(timings_of_two_close_candidates(no_finalists), 2);
}

// Three rounds (the default) in orders that differ, each finalist scoring the median of its four times. The
// case of worklog §98: L's steady time is the best, but it runs 4 % slow when timed right after the heavier H.
// One reverse round times L right after H and the mean of its two times hands the pick to H; the next two rounds
// time L after other finalists, and its median is its steady time again.
TEST(Autotuner, FinalistsAreTimedInThreeRoundsOfDifferingOrderAndScoreTheirMedian) {
  FakeKernel k;
  k.add("L", 1.19).add("H", 1.21).add("X", 1.25).add("far", 1.40);
  auto slow_after_heavy = [&k](std::vector<std::string>& order) {
    TuneHooks h = k.hooks();
    h.time = [&k, &order, first = h.time](size_t i) {
      const bool after_heavy = !order.empty() && order.back() == "H";
      order.push_back(k.ids[i]);
      TimeOutcome t = first(i);
      if (k.ids[i] == "L" && after_heavy)
        t.ms = 1.24;
      return t;
    };
    return h;
  };

  std::vector<std::string> order;
  Autotuner tuner("", quiet());
  TuneResult r = tuner.tune(k.request(), slow_after_heavy(order));
  // The first pass, then round 0 backwards, round 1 the halves dealt in turn, round 2 that backwards.
  EXPECT_EQ(order, (std::vector<std::string>{"L", "H", "X", "far", "X", "H", "L", "L", "X", "H", "H", "X", "L"}));
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(k.ids[*r.best], "L");
  EXPECT_DOUBLE_EQ(r.best_ms, 1.19); // the median of 1.19, 1.24, 1.19, 1.19
  EXPECT_DOUBLE_EQ(row(r, "H").ms, 1.21);
  EXPECT_DOUBLE_EQ(row(r, "far").ms, 1.40) << "beyond the 10 % margin: timed once";

  std::vector<std::string> once;
  Autotuner old("", one_round());
  TuneResult o = old.tune(k.request(), slow_after_heavy(once));
  ASSERT_TRUE(o.best.has_value());
  EXPECT_EQ(k.ids[*o.best], "H") << "one round: L scores (1.19 + 1.24) / 2";

  // A finalist that fails in a later round keeps the median of the times it has; no rounds: timed once.
  FakeKernel flaky;
  flaky.add("A", 1.00).add("B", 1.02);
  int b_timings = 0;
  TuneHooks h = flaky.hooks();
  h.time = [&flaky, &b_timings, first = h.time](size_t i) {
    if (flaky.ids[i] == "B" && ++b_timings == 3)
      return TimeOutcome{0, "CUDA_ERROR_LAUNCH_TIMEOUT"};
    return first(i);
  };
  Autotuner tolerant("", quiet());
  TuneResult f = tolerant.tune(flaky.request(), h);
  EXPECT_EQ(row(f, "B").status, CandidateStatus::Ok);
  EXPECT_DOUBLE_EQ(row(f, "B").ms, 1.02);
  EXPECT_EQ(b_timings, 4);
  AutotunerOptions no_rounds = quiet();
  no_rounds.finalist_rounds = 0;
  EXPECT_EQ(timings_of_two_close_candidates(no_rounds), 2);
}

// A candidate outside the six finalists keeps its first pass: its time may be lower than the winner's median (a
// GPU that slowed down after the first pass), and its samples say it was timed once.
TEST(Autotuner, ACandidateTimedOnceMayShowLessThanTheWinnersMedian) {
  FakeKernel k;
  k.add("A", 1.00).add("B", 1.01).add("C", 1.02).add("D", 1.03).add("E", 1.04).add("F", 1.05).add("G", 1.06);
  const std::map<std::string, double> slower = {{"A", 1.10}, {"B", 1.11}, {"C", 1.12},
                                                {"D", 1.13}, {"E", 1.14}, {"F", 1.15}};
  std::vector<std::string> order;
  Autotuner tuner("", quiet());
  TuneResult r = tuner.tune(k.request(), retimed_hooks(k, slower, order));
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(k.ids[*r.best], "A");
  EXPECT_EQ(row(r, "A").samples, 4) << "the first pass and three rounds";
  EXPECT_DOUBLE_EQ(r.best_ms, 1.10);
  EXPECT_EQ(row(r, "G").samples, 1);
  EXPECT_LT(row(r, "G").ms, r.best_ms);
}

} // namespace
