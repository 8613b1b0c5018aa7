// Tests for runtime/report: how measured op spans become the predicted-vs-measured rows.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "planner/cost/cost_model.hpp"
#include "runtime/report.hpp"
#include "test_plan.hpp"

using namespace parplan;
using namespace parplan::runtime;
using parplan::runtime::testing::small_plan;

namespace {

Op make(OpKind kind, Term term, Group g = Group::tp, bool overlap = false, int32_t wait_for = -1) {
  Op op;
  op.kind = kind;
  op.term = term;
  op.group = g;
  op.overlap = overlap;
  op.wait_for = wait_for;
  return op;
}

// One rank's run of one measured step of `step_s` seconds, its ops spanning `spans` (one per program op).
RunResult one_rank_run(double step_s, std::vector<OpTime> spans) {
  RankRun rr;
  rr.step_s = {step_s};
  rr.step_ops = {std::move(spans)};
  RunResult r;
  r.ranks = {rr};
  r.step_s = {step_s};
  return r;
}

double row(const std::vector<TermRow>& rows, const std::string& name) {
  for (const TermRow& r : rows) {
    if (r.term == name) return r.measured;
  }
  FAIL("no row " << name);
  return 0;
}

}  // namespace

TEST_CASE("compare: an overlapped TP reduction counts only the wait where it is joined; DP buckets count whole") {
  const Plan plan = small_plan();
  const Estimate e = estimate(plan);
  // dgrad [0, 1], its reduction on the comm stream [1, 4] (overlapped), wgrad [1, 3], then an op that waits for the
  // reduction and starts at 4 (1 s exposed), a blocking TP all-reduce [5, 5.5], an overlapped DP bucket [5.5, 7].
  Program prog;
  prog.ops = {make(OpKind::gemm, Term::backward),
              make(OpKind::collective, Term::tp_comm, Group::tp, true),
              make(OpKind::gemm, Term::backward),
              make(OpKind::gemm, Term::backward, Group::tp, false, 1),
              make(OpKind::collective, Term::tp_comm),
              make(OpKind::collective, Term::dp_comm, Group::dp_cp, true)};
  const RunResult r = one_rank_run(7.0, {{0, 1}, {1, 4}, {1, 3}, {4, 5}, {5, 5.5}, {5.5, 7}});
  const std::vector<TermRow> rows = compare(e, r, {prog}, false);
  CHECK(row(rows, "compute") == doctest::Approx(4.0));          // three GEMMs: 1 + 2 + 1
  CHECK(row(rows, "tp comm") == doctest::Approx(1.0 + 0.5));    // the wait for the overlapped one + the blocking one
  CHECK(row(rows, "dp comm (total)") == doctest::Approx(1.5));  // buckets: their whole duration
  // Rank-local runs measure no communication: no waits are counted.
  const std::vector<TermRow> local = compare(e, r, {prog}, true);
  CHECK(row(local, "tp comm") == doctest::Approx(0.5));
}

TEST_CASE("compare: a grouped p2p exchange counts its span once; back-to-back exchanges each count") {
  const Plan plan = small_plan();
  const Estimate e = estimate(plan);
  // A send and a receive in one exchange on the pp group [1, 3] (each op given the exchange's span), an exchange on
  // another group at the same instant with no duration [3, 3] (a host run's clock can give equal stamps), and a send
  // and a receive of a second pp exchange [3, 3.5]. Grouping by equal start would drop the second pp exchange.
  Program prog;
  Op send = make(OpKind::p2p, Term::pp_comm, Group::pp), recv = send;
  send.collective = CollectiveKind::send;
  recv.collective = CollectiveKind::recv;
  Op other = make(OpKind::p2p, Term::cp_comm, Group::cp);
  other.collective = CollectiveKind::send;
  prog.ops = {make(OpKind::gemm, Term::forward), send, recv, other, send, recv};
  const RunResult r = one_rank_run(3.5, {{0, 1}, {1, 3}, {1, 3}, {3, 3}, {3, 3.5}, {3, 3.5}});
  const std::vector<TermRow> rows = compare(e, r, {prog}, false);
  CHECK(row(rows, "compute") == doctest::Approx(1.0));
  CHECK(row(rows, "pp comm") == doctest::Approx(2.0 + 0.5));
}
