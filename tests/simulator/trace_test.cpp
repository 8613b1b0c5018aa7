// Tests for simulator/trace: valid Chrome trace JSON with processes, threads, flows and counters; byte-identical
// golden file (regenerate with PARPLAN_UPDATE_GOLDEN=1).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "planner/test_plans.hpp"
#include "simulator/ascii.hpp"
#include "simulator/fixture.hpp"
#include "simulator/simulate.hpp"
#include "simulator/trace.hpp"

using namespace parplan;
using namespace parplan::sim;

TEST_CASE("trace: Chrome trace JSON with a process per stage, a thread per stream, flows and a memory counter") {
  const SimResult r = sim::test::small_step();
  const nlohmann::json j = nlohmann::json::parse(chrome_trace_json(r.timeline));
  int processes = 0, threads = 0, complete = 0, flow_start = 0, flow_end = 0, counters = 0, forwards = 0;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "process_name") ++processes;
    if (ph == "M" && e["name"] == "thread_name") ++threads;
    if (ph == "X") {
      ++complete;
      CHECK(e["dur"].get<double>() >= 0);
      if (e["cat"] == "forward") ++forwards;
    }
    if (ph == "s") ++flow_start;
    if (ph == "f") ++flow_end;
    if (ph == "C") ++counters;
  }
  CHECK(processes == 2);
  CHECK(threads == 2 * 5);
  CHECK(forwards == 2 * 3);
  CHECK(flow_start == 2 * 3);  // one activation send and one gradient send per microbatch across the single boundary
  CHECK(flow_end == flow_start);
  CHECK(counters > 4);
  CHECK(complete > 20);
}

TEST_CASE("trace: slices on one thread never overlap, to the nanosecond (GPT-3 175B, pp 8, 16 microbatches)") {
  // ts and dur were rounded separately, so a slice could end 1 ns after its successor began (20,832 such pairs over
  // 47 audited plans); Chrome and Perfetto require slices on one thread to nest.
  Plan plan = parplan::test::korthikanti_175b();
  plan.parallel.num_microbatches = 16;
  plan.parallel.vpp = 1;
  plan.parallel.schedule = Schedule::one_f_one_b;
  plan.training.global_batch = 16;
  const SimResult r = simulate(plan);
  const nlohmann::json j = nlohmann::json::parse(chrome_trace_json(r.timeline));
  std::map<std::pair<int, int>, std::vector<std::pair<int64_t, int64_t>>> tracks;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const int64_t ts = std::llround(e["ts"].get<double>() * 1000), dur = std::llround(e["dur"].get<double>() * 1000);
    tracks[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({ts, ts + dur});
  }
  int64_t pairs = 0, overlaps = 0;
  for (auto& [key, slices] : tracks) {
    if (key.second != 0) continue;  // the compute stream: an ordered stream, one op at a time
    std::sort(slices.begin(), slices.end());
    for (size_t i = 1; i < slices.size(); ++i, ++pairs) overlaps += slices[i].first < slices[i - 1].second;
  }
  CHECK(pairs > 500);
  CHECK(overlaps == 0);
}

TEST_CASE("trace: times beyond 9e18 ns saturate: the trace stays valid JSON with non-negative numbers") {
  // A step of 1e12 s (a profile with a near-zero peak) overflowed the nanosecond conversion: "-9223372036854775.-808".
  Timeline t = sim::test::small_step().timeline;
  for (auto& tr : t.tracks)
    for (auto& st : tr.streams)
      for (auto& e : st.events) e.start_s *= 1e13, e.end_s *= 1e13;
  t.step_s *= 1e13;
  const nlohmann::json j = nlohmann::json::parse(chrome_trace_json(t));
  for (const auto& e : j["traceEvents"]) {
    if (e.contains("ts")) CHECK(e["ts"].get<double>() >= 0);
    if (e.contains("dur")) CHECK(e["dur"].get<double>() >= 0);
  }
  CHECK(j["otherData"]["step_us"].get<double>() > 1e15);
}

TEST_CASE("trace: every p2p flow arrow ends on the receiving op (same microbatch, at its start), for all schedules") {
  // Arrows ended at the arrival time, inside whatever op was running then (35-60% of them bound to another op).
  for (Schedule sched : {Schedule::one_f_one_b, Schedule::zero_bubble, Schedule::interleaved, Schedule::gpipe}) {
    Plan plan = parplan::test::korthikanti_175b();
    plan.parallel.num_microbatches = 16;
    plan.parallel.schedule = sched;
    plan.parallel.vpp = sched == Schedule::interleaved ? 2 : 1;
    plan.training.global_batch = 16;
    SimOptions o;
    o.record_timeline = true;
    const nlohmann::json j = nlohmann::json::parse(chrome_trace_json(simulate(plan, o).timeline));
    struct Slice {
      int mb, chunk;
      std::string cat;
    };
    std::map<std::pair<int, int64_t>, Slice> slice_starts;  // (pid, ts ns) of compute-thread slices
    for (const auto& e : j["traceEvents"]) {
      if (e["ph"] == "X" && e["tid"] == 0 && e.contains("args") && e["args"].contains("microbatch") &&
          e["cat"] != "layer_comm") {
        slice_starts[{e["pid"].get<int>(), std::llround(e["ts"].get<double>() * 1000)}] = {
            e["args"]["microbatch"].get<int>(), e["args"]["chunk"].get<int>(), e["cat"].get<std::string>()};
      }
    }
    const int p = 8;
    int sent_mb = -1, sent_chunk = -1, from = -1, to = -1, ends = 0, on_consumer = 0;
    for (const auto& e : j["traceEvents"]) {
      if (e["ph"] == "X" && e["cat"] == "pp_comm") {
        sent_mb = e["args"]["microbatch"];
        sent_chunk = e["args"]["chunk"];
        from = e["pid"];
        to = e["args"]["to_stage"];
      }
      if (e["ph"] != "f") continue;
      ++ends;
      // An activation goes to the next stage (the next chunk when it wraps to stage 0), a gradient to the previous
      // stage (the previous chunk when it wraps to the last stage); its consumer is a forward, resp. a backward.
      const bool forward = to == from + 1 || (from == p - 1 && to == 0 && p > 2);
      const int chunk = forward ? sent_chunk + (from == p - 1 ? 1 : 0) : sent_chunk - (from == 0 ? 1 : 0);
      const auto at = slice_starts.find({e["pid"].get<int>(), std::llround(e["ts"].get<double>() * 1000)});
      const bool kind_ok = at != slice_starts.end() &&
                           (forward ? at->second.cat == "forward"
                                    : at->second.cat == "backward" || at->second.cat == "backward_input" ||
                                          at->second.cat == "recompute");
      on_consumer += kind_ok && at->second.mb == sent_mb && at->second.chunk == chunk;
    }
    CAPTURE(to_string(sched));
    CHECK(ends >= 2 * 7 * 16);
    CHECK(on_consumer == ends);
  }
}

TEST_CASE("trace: same input, byte-identical trace (golden file)") {
  const std::string a = chrome_trace_json(sim::test::small_step().timeline);
  CHECK(a == chrome_trace_json(sim::test::small_step().timeline));
  const std::string path = std::string(PARPLAN_TEST_DIR) + "/simulator/golden/trace_1f1b_p2_m3.json";
  if (std::getenv("PARPLAN_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << a;
  }
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "missing golden file " << path << " (run with PARPLAN_UPDATE_GOLDEN=1)");
  std::stringstream ss;
  ss << in.rdbuf();
  CHECK(ss.str() == a);
}

TEST_CASE("trace: exposed activation-offload waits are host_copy events on the compute thread, summing to the "
          "summary's offload_exposed_s; the ASCII view draws them as H") {
  // They were layer_comm events ("comm N", `~`), while the summary counts them as host copies (exposed).
  Plan plan = parplan::test::korthikanti_175b();
  plan.parallel.pp = 4;
  plan.parallel.vpp = 1;
  plan.parallel.schedule = Schedule::one_f_one_b;
  plan.parallel.num_microbatches = 8;
  plan.training.global_batch = 8;
  plan.parallel.offload.activations = true;
  plan.parallel.overlap_tp_comm = false;  // exposed TP comm too: layer_comm events stay beside the waits
  plan.cluster.host_link.bandwidth_Bps = 2e9;
  const SimResult r = simulate(plan);
  const nlohmann::json j = nlohmann::json::parse(chrome_trace_json(r.timeline));
  std::map<int64_t, double> waits_us, comm_us;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X" || e["tid"] != 0) continue;  // thread 0: the compute stream
    const int64_t stage = e["pid"];
    if (e["cat"] == "host_copy") {
      CHECK(e["name"].get<std::string>().rfind("host copy ", 0) == 0);  // "host copy 3": with its microbatch
      waits_us[stage] += e["dur"].get<double>();
    }
    if (e["cat"] == "layer_comm") comm_us[stage] += e["dur"].get<double>();
  }
  REQUIRE(waits_us.size() == 4);
  for (const StageSummary& st : r.summary.stages) {
    CAPTURE(st.stage);
    CHECK(st.offload_exposed_s > 0);
    CHECK(waits_us[st.stage] * 1e-6 == doctest::Approx(st.offload_exposed_s).epsilon(1e-6));
    CHECK(comm_us[st.stage] * 1e-6 == doctest::Approx(st.tp_exposed_s + st.cp_exposed_s).epsilon(1e-6));
  }
  const std::string ascii = render_ascii(r.timeline, 200);
  CHECK(ascii.find("HH") != std::string::npos);
}
