// Search tests: brute force over every candidate with estimate() agrees with search(); determinism across runs and
// thread counts; rejection counts per reason; objectives; the model-state floor (175B on A100-40GB).
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "planner/spec/config.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/search/search.hpp"
#include "planner/search/search_report.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

namespace {

SearchRequest small_request(int64_t gpus = 8) {
  SearchRequest r;
  r.model = test::profiles().model("gpt3-1.3b", "test");
  r.gpu = test::profiles().gpu("a100-40gb", "test");
  r.cluster = test::profiles().cluster("dgx-a100-40gb", "test");
  r.gpus = gpus;
  r.training.global_batch = 64;
  r.training.seq_len = 2048;
  r.space.max_micro_batch = 8;
  r.threads = 1;
  return r;
}

std::vector<int64_t> divs(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 1; i <= n; ++i) {
    if (n % i == 0) v.push_back(i);
  }
  return v;
}

// The HSDP replica counts the search tries for a mesh (docs/suggest.md): 1, and where the plan shards without split
// experts or per-linear gathers, each r > 1 dividing dp with dp / r >= 2 whose shard block tp cp dp / r is a
// power-of-two multiple of the NVLink domain D.
std::vector<int64_t> replica_counts(const SearchRequest& req, const ParallelConfig& c) {
  std::vector<int64_t> out{1};
  const bool shards = c.zero_stage >= 1 || c.distributed_optimizer;
  if (!shards || c.ep > 1 || c.etp > 0 || (c.zero_stage >= 3 && c.zero3_gather_unit == Zero3GatherUnit::linear)) {
    return out;
  }
  const int64_t D = req.cluster.placed_domain(req.gpus);
  for (int64_t r : divs(c.dp)) {
    const int64_t block = c.tp * c.cp * (c.dp / r);
    if (r < 2 || c.dp / r < 2) continue;
    const int64_t k = block / D;
    const bool whole_domains = block % D == 0 && (k & (k - 1)) == 0;
    const int64_t node = req.cluster.gpus_per_node;
    if (whole_domains || D % block == 0 || (D % node != 0 && block == node)) out.push_back(r);
  }
  return out;
}

struct Brute {
  int64_t candidates = 0, rejected = 0, fit = 0;
  std::map<int, int64_t> by_reason;
  std::vector<std::pair<Plan, Estimate>> fits;
  double min_oom_peak = 1e300;
};

// An independent enumeration of the documented search space (docs/suggest.md), scored with estimate().
Brute brute_force(const SearchRequest& req) {
  Brute b;
  Plan p;
  p.model = req.model;
  p.gpu = req.gpu;
  p.cluster = req.cluster;
  p.training = req.training;
  p.num_gpus = req.gpus;
  ValidateOptions vo{req.space.allow_tp_across_nodes};
  auto eval_one = [&]() {
    ++b.candidates;
    const Validity v = validate(p, vo);
    if (!v.ok()) {
      ++b.rejected;
      for (int r = 0; r < kNumRejects; ++r) {
        if (v.has(static_cast<Reject>(r))) ++b.by_reason[r];
      }
      return false;
    }
    const Estimate e = estimate(p);
    if (!e.fits) {
      ++b.rejected;
      ++b.by_reason[static_cast<int>(Reject::out_of_memory)];
      b.min_oom_peak = std::min(b.min_oom_peak, e.peak_memory_bytes);
      return false;
    }
    ++b.fit;
    b.fits.emplace_back(p, e);
    return true;
  };
  // Full recompute of every layer and, where that fits but recompute none does not, of the first K layers of each
  // chunk for the smallest K that fits, found by trying K = 1, 2, ... in turn (the search bisects).
  auto eval = [&]() {
    if (!eval_one() || p.parallel.recompute != Recompute::full) return;
    Plan none = p;
    none.parallel.recompute = Recompute::none;
    if (estimate(none).fits) return;
    for (int64_t k = 1; k < largest_chunk_layers(p); ++k) {
      p.parallel.recompute_layers = k;
      if (estimate(p).fits) {
        eval_one();
        break;
      }
    }
    p.parallel.recompute_layers = 0;
  };
  const int64_t B = req.training.global_batch;
  for (int64_t tp : divs(req.gpus)) {
    for (int64_t pp : divs(req.gpus / tp)) {
      for (int64_t cp : divs(req.gpus / tp / pp)) {
        const int64_t dp = req.gpus / tp / pp / cp;
        std::vector<int64_t> mbs;
        for (int64_t mb : divs(B % dp == 0 ? B / dp : 1)) {
          if (mb <= req.space.max_micro_batch) mbs.push_back(mb);
        }
        for (int64_t mb : mbs) {
          for (bool sp : {false, true}) {
            for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full}) {
              for (Sharding sh : req.space.sharding) {
                if (dp * cp == 1 && (sh.zero_stage != 0 || sh.distributed_optimizer)) continue;
                // With pipelining ZeRO-2/3 run as ZeRO-1 (the distributed optimizer, in the space).
                if (pp > 1 && sh.zero_stage >= 2) continue;
                for (Schedule s : req.space.schedules) {
                  // 1F1B in the space: GPipe (never better) and, with one stage, ZB-H1 and ZB-2p (the same plan)
                  // are not tried (docs/suggest.md).
                  if ((s == Schedule::gpipe || (splits_backward(s) && pp == 1)) &&
                      std::find(req.space.schedules.begin(), req.space.schedules.end(), Schedule::one_f_one_b) !=
                          req.space.schedules.end()) {
                    continue;
                  }
                  ParallelConfig& c = p.parallel;
                  c = ParallelConfig{};
                  c.dp = dp, c.tp = tp, c.pp = pp, c.cp = cp, c.micro_batch = mb;
                  c.num_microbatches = (B + dp * mb - 1) / (dp * mb);
                  c.sequence_parallel = sp, c.recompute = rc, c.zero_stage = sh.zero_stage;
                  c.distributed_optimizer = sh.distributed_optimizer, c.schedule = s;
                  c.zero3_gather_unit = sh.zero_stage >= 3 ? req.space.zero3_gather_unit : Zero3GatherUnit::layer;
                  c.fsdp2 = req.space.fsdp2 && sh.zero_stage >= 3 && c.zero3_gather_unit == Zero3GatherUnit::layer;
                  c.async_tp_backward = req.space.async_tp_backward || tp == 1;
                  c.tp_collective_copies = req.space.tp_collective_copies && tp > 1 && sp;
                  for (int64_t r : replica_counts(req, c)) {
                    c.dp_replicate = r;
                    if (s == Schedule::interleaved) {
                      for (int64_t v : req.space.vpp) {
                        c.vpp = v;
                        c.last_stage_layers = 0;
                        eval();
                        // The search's one uneven interleaved split, where no even split interleaves.
                        c.last_stage_layers = interleaved_last_stage_layers(req.model.layers, pp, v);
                        if (c.last_stage_layers > 0) eval();
                      }
                      c.vpp = 1;
                      c.last_stage_layers = 0;
                      continue;
                    }
                    eval();
                    if (pp > 1 && req.model.layers / pp >= 2 && s != Schedule::zb_v) {  // ZB-V: the even split only
                      c.last_stage_layers = req.model.layers / pp - 1;
                      eval();
                      c.last_stage_layers = 0;
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return b;
}

bool same_config(const ParallelConfig& a, const ParallelConfig& b) {
  return a.dp == b.dp && a.tp == b.tp && a.pp == b.pp && a.cp == b.cp && a.ep == b.ep && a.vpp == b.vpp &&
         a.micro_batch == b.micro_batch && a.num_microbatches == b.num_microbatches && a.schedule == b.schedule &&
         a.recompute == b.recompute && a.sequence_parallel == b.sequence_parallel && a.zero_stage == b.zero_stage &&
         a.distributed_optimizer == b.distributed_optimizer && a.zero3_gather_unit == b.zero3_gather_unit &&
         a.fsdp2 == b.fsdp2 && a.async_tp_backward == b.async_tp_backward &&
         a.tp_collective_copies == b.tp_collective_copies &&
         a.last_stage_layers == b.last_stage_layers &&
         a.first_stage_layers == b.first_stage_layers && a.recompute_layers == b.recompute_layers &&
         a.dp_replicate == b.dp_replicate;
}

}  // namespace

TEST_CASE("search: the winner and every fitting plan equal a brute-force loop over all candidates with estimate()") {
  // Both ZeRO-3 gather units, FSDP2's copies and DTensor's TP (blocking backward collectives and the copies around
  // them): the framework's, set for the whole search (docs/suggest.md).
  struct Case {
    int64_t gpus;
    Zero3GatherUnit unit;
    bool fsdp2, dtensor_tp;
  };
  for (const auto& [gpus, unit, fsdp2, dtensor_tp] :
       {Case{8, Zero3GatherUnit::layer, false, false}, Case{16, Zero3GatherUnit::layer, false, false},
        Case{16, Zero3GatherUnit::linear, false, false}, Case{8, Zero3GatherUnit::layer, true, true}}) {
    SearchRequest req = small_request(gpus);
    req.space.zero3_gather_unit = unit;
    req.space.fsdp2 = fsdp2;
    req.space.async_tp_backward = !dtensor_tp;
    req.space.tp_collective_copies = dtensor_tp;
    CAPTURE(fsdp2);
    CAPTURE(dtensor_tp);
    req.top_k = 1'000'000;            // keep every fitting plan
    req.training.global_batch = 256;  // micro-batch 8 at dp 16 (tp 1, pp 1) does not fit: a closest rejected plan
    const SearchResult res = search(req);
    const Brute b = brute_force(req);
    CAPTURE(gpus);
    CAPTURE(static_cast<int>(unit));
    CHECK(res.candidates == b.candidates);
    CHECK(res.rejected == b.rejected);
    CHECK(res.evaluated == b.fit);
    REQUIRE(res.top.size() == b.fits.size());
    REQUIRE(!b.fits.empty());
    for (int r = 0; r < kNumRejects; ++r) {
      CAPTURE(reject_name(static_cast<Reject>(r)));
      CHECK(res.by_reason[static_cast<size_t>(r)].count == (b.by_reason.count(r) ? b.by_reason.at(r) : 0));
    }
    // The brute-force best: fastest step, then least memory (the documented tie-break keys follow).
    size_t best = 0;
    for (size_t i = 1; i < b.fits.size(); ++i) {
      const Estimate& e = b.fits[i].second;
      const Estimate& w = b.fits[best].second;
      if (e.time.step_s < w.time.step_s || (e.time.step_s == w.time.step_s && e.peak_memory_bytes < w.peak_memory_bytes)) best = i;
    }
    CHECK(res.top[0].time.step_s == b.fits[best].second.time.step_s);  // bit-identical, not approximately
    CHECK(res.top[0].peak_bytes == b.fits[best].second.peak_memory_bytes);
    // Every ranked plan carries exactly estimate()'s numbers (checks the cached cost parts and the 3-stage peak bound).
    for (const Candidate& c : res.top) {
      const Estimate e = estimate(candidate_plan(req, c));
      REQUIRE(e.fits);
      CHECK(c.time.step_s == e.time.step_s);
      CHECK(c.time.mfu == e.time.mfu);
      CHECK(c.time.bubble_s == e.time.bubble_s);
      CHECK(c.time.dp_comm_exposed_s == e.time.dp_comm_exposed_s);
      CHECK(c.peak_bytes == e.peak_memory_bytes);
      CHECK(c.peak_stage == e.peak_stage);
    }
    for (size_t i = 1; i < res.top.size(); ++i) CHECK(ranks_before(res.top[i - 1], res.top[i], Objective::fastest));
    int zero3 = 0;
    for (const Candidate& c : res.top) {
      if (c.parallel.zero_stage < 3) CHECK(c.parallel.zero3_gather_unit == Zero3GatherUnit::layer);
      if (c.parallel.zero_stage < 3) continue;
      ++zero3;
      CHECK(c.parallel.zero3_gather_unit == unit);
      CHECK(c.parallel.fsdp2 == fsdp2);
    }
    for (const Candidate& c : res.top) {
      const bool tp = c.parallel.tp > 1;
      CHECK(c.parallel.async_tp_backward == (!dtensor_tp || !tp));
      CHECK(c.parallel.tp_collective_copies == (dtensor_tp && tp && c.parallel.sequence_parallel));
    }
    CHECK(zero3 > 0);
    // Full recompute of some layers only (the smallest K that fits), where every layer fits and no recompute does not.
    CHECK(std::any_of(res.top.begin(), res.top.end(), [](const Candidate& c) { return c.parallel.recompute_layers > 0; }));
    REQUIRE(res.closest);
    CHECK(res.closest->peak_bytes == b.min_oom_peak);
  }
}

TEST_CASE("search: with one stage ZB-H1 is never better than 1F1B (same memory, W alone hides DP), tried unless pinned") {
  SearchRequest req = small_request(8);
  req.top_k = 1'000'000;
  const SearchResult all = search(req);
  int64_t zb_pp1 = 0, f1b_pp1 = 0, zb_slower = 0;
  for (const Candidate& c : all.top) {
    if (c.parallel.pp != 1) continue;
    zb_pp1 += c.parallel.schedule == Schedule::zero_bubble;
    f1b_pp1 += c.parallel.schedule == Schedule::one_f_one_b;
  }
  CHECK(zb_pp1 == 0);
  REQUIRE(f1b_pp1 > 0);
  for (const Candidate& c : all.top) {
    if (c.parallel.pp != 1 || c.parallel.schedule != Schedule::one_f_one_b) continue;
    Plan f = candidate_plan(req, c), z = f;
    z.parallel.schedule = Schedule::zero_bubble;
    if (!validate(z).ok()) continue;  // full recompute
    const Estimate ef = estimate(f), ez = estimate(z);
    CHECK(ez.time.step_s >= ef.time.step_s);
    CHECK(ez.peak_memory_bytes == ef.peak_memory_bytes);
    zb_slower += ez.time.step_s > ef.time.step_s;
  }
  CHECK(zb_slower > 0);  // where the DP reduction outlasts W
  for (const Candidate& c : all.top) {  // ZB-2p with one stage runs ZB-H1's order (F, B, W per microbatch)
    CHECK_FALSE((c.parallel.pp == 1 && c.parallel.schedule == Schedule::zb_2p));
  }
  req.space.schedules = {Schedule::zero_bubble};
  const SearchResult pinned = search(req);
  int64_t pinned_pp1 = 0;
  for (const Candidate& c : pinned.top) pinned_pp1 += c.parallel.pp == 1 && c.parallel.schedule == Schedule::zero_bubble;
  CHECK(pinned_pp1 > 0);
}

TEST_CASE("search: ZB-2p is searched with pp > 1 and holds at least ZB-H1's memory (2p - 1 stashes against p)") {
  SearchRequest req = small_request(8);
  req.top_k = 1'000'000;
  const SearchResult all = search(req);
  int64_t zb2p = 0;
  for (const Candidate& c : all.top) {
    if (c.parallel.schedule != Schedule::zb_2p) continue;
    ++zb2p;
    Plan z = candidate_plan(req, c), h = z;
    h.parallel.schedule = Schedule::zero_bubble;
    CHECK(estimate(z).peak_memory_bytes >= estimate(h).peak_memory_bytes);
  }
  CHECK(zb2p > 0);
  req.space.schedules = {Schedule::zb_2p};  // pinned: only ZB-2p is listed
  for (const Candidate& c : search(req).top) CHECK(c.parallel.schedule == Schedule::zb_2p);
}

TEST_CASE("search: ZB-V only when asked for, then with pp > 1 and even splits, each its estimate") {
  SearchRequest req = small_request(8);
  req.top_k = 1'000'000;
  for (const Candidate& c : search(req).top) CHECK(c.parallel.schedule != Schedule::zb_v);  // not by default
  req.space.schedules = {Schedule::one_f_one_b, Schedule::zb_v};
  int64_t zbv = 0;
  for (const Candidate& c : search(req).top) {
    if (c.parallel.schedule != Schedule::zb_v) continue;
    ++zbv;
    CHECK(c.parallel.pp > 1);
    CHECK(c.parallel.last_stage_layers == 0);  // its output layer is on stage 0: no lighter last stage
    CHECK(c.time.step_s == doctest::Approx(estimate(candidate_plan(req, c)).time.step_s));
  }
  CHECK(zbv > 0);
}

TEST_CASE("search: a short top list stops ZB-V orders early (step_cutoff) and keeps the brute force's best plans") {
  // The search times a ZB-V candidate only as far as it could still enter the full top list; the plans it keeps must
  // be the brute force's k fastest, with estimate()'s numbers, and the counts unchanged.
  for (int64_t gpus : {8, 16}) {
    SearchRequest req = small_request(gpus);
    req.space.schedules = {Schedule::zb_v};  // every timed plan a ZB-V order (pp > 1)
    const Brute b = brute_force(req);
    std::vector<double> keys;  // the ranking's first key (steps within its rounding tie)
    for (const auto& [plan, e] : b.fits) keys.push_back(step_rank_key(e.time.step_s));
    std::sort(keys.begin(), keys.end());
    for (const int k : {1, 3, 10}) {
      req.top_k = k;
      const SearchResult res = search(req);
      CAPTURE(gpus);
      CAPTURE(k);
      CHECK(res.candidates == b.candidates);
      CHECK(res.evaluated == b.fit);
      REQUIRE(res.top.size() == static_cast<size_t>(k));
      for (size_t i = 0; i < res.top.size(); ++i) {
        CHECK(step_rank_key(res.top[i].time.step_s) == keys[i]);
        // bit-identical to estimate(): the kept plans were timed in full
        CHECK(res.top[i].time.step_s == estimate(candidate_plan(req, res.top[i])).time.step_s);
      }
    }
  }
}

TEST_CASE("search: DualPipeV only when asked for, then with pp > 1, even splits and m >= 2 pp, each its estimate") {
  SearchRequest req = small_request(8);
  req.top_k = 1'000'000;
  for (const Candidate& c : search(req).top) CHECK(c.parallel.schedule != Schedule::dualpipe_v);  // not by default
  req.space.schedules = {Schedule::one_f_one_b, Schedule::dualpipe_v};
  int64_t dualpipe = 0;
  for (const Candidate& c : search(req).top) {
    if (c.parallel.schedule != Schedule::dualpipe_v) continue;
    ++dualpipe;
    CHECK(c.parallel.pp > 1);
    CHECK(c.parallel.num_microbatches >= 2 * c.parallel.pp);
    CHECK(c.parallel.last_stage_layers == 0);  // its output layer is on stage 0: no lighter last stage
    CHECK(c.time.step_s == estimate(candidate_plan(req, c)).time.step_s);
  }
  CHECK(dualpipe > 0);
  // A short top list keeps the brute force's best (its orders stop early too, as ZB-V's).
  req.space.schedules = {Schedule::dualpipe_v};
  const Brute b = brute_force(req);
  std::vector<double> keys;
  for (const auto& [plan, e] : b.fits) keys.push_back(step_rank_key(e.time.step_s));
  std::sort(keys.begin(), keys.end());
  req.top_k = 3;
  const SearchResult res = search(req);
  REQUIRE(res.top.size() == 3);
  CHECK(res.evaluated == b.fit);
  for (size_t i = 0; i < 3; ++i) CHECK(step_rank_key(res.top[i].time.step_s) == keys[i]);
}

TEST_CASE("search: GPipe never ranks above 1F1B (at least its step and memory), so it is tried only when pinned") {
  SearchRequest req = small_request(8);
  req.top_k = 1'000'000;
  REQUIRE(std::find(req.space.schedules.begin(), req.space.schedules.end(), Schedule::gpipe) != req.space.schedules.end());
  const SearchResult all = search(req);
  int64_t gpipe = 0, checked = 0, more_memory = 0;
  for (const Candidate& c : all.top) gpipe += c.parallel.schedule == Schedule::gpipe;
  CHECK(gpipe == 0);
  for (const Candidate& c : all.top) {
    if (c.parallel.schedule != Schedule::one_f_one_b) continue;
    Plan f = candidate_plan(req, c), g = f;
    g.parallel.schedule = Schedule::gpipe;
    REQUIRE(validate(g).ok());
    const Estimate ef = estimate(f), eg = estimate(g);
    // Equal for uniform stages (to rounding: the two forms add in different orders), more with uneven stages or
    // ZeRO-2/3 reduce-scatters outlasting the backward phase.
    CHECK(eg.time.step_s >= ef.time.step_s * (1 - 1e-12));
    CHECK(eg.peak_memory_bytes >= ef.peak_memory_bytes);
    more_memory += eg.peak_memory_bytes > ef.peak_memory_bytes;
    ++checked;
  }
  CHECK(checked > 0);
  CHECK(more_memory > 0);  // with m > 1 GPipe holds more
  req.space.schedules = {Schedule::gpipe};
  const SearchResult pinned = search(req);
  REQUIRE_FALSE(pinned.top.empty());
  for (const Candidate& c : pinned.top) CHECK(c.parallel.schedule == Schedule::gpipe);
}

TEST_CASE("search: peak memory from stages 0, 1 and p-1 equals peak_memory_bytes over deep pipelines") {
  SearchRequest req;
  req.model = test::profiles().model("gpt3-175b", "test");
  req.gpu = test::profiles().gpu("h100-80gb", "test");
  req.cluster = test::profiles().cluster("dgx-h100", "test");
  req.gpus = 96;
  req.training.global_batch = 192;
  req.training.seq_len = 2048;
  req.gpu.memory_bytes = int64_t{1} << 50;  // everything fits: every valid candidate is ranked and checked
  req.space.tp = {2};
  req.space.max_micro_batch = 2;
  req.top_k = 1'000'000;
  const SearchResult res = search(req);
  REQUIRE(res.top.size() > 500);
  int64_t deep = 0;
  for (const Candidate& c : res.top) {
    int64_t at = -1;
    const double pk = peak_memory_bytes(candidate_plan(req, c), &at);
    CHECK(c.peak_bytes == pk);
    CHECK(c.peak_stage == at);
    deep += c.parallel.pp >= 4;
  }
  CHECK(deep > 100);
}

// Stages of one size that hold different layers (DeepSeek-V3's leading dense layers, Llama 4 Maverick's interleaved
// ones), an MTP block on the output stage (recomputed with the layers; its weights gathered in fp8 or not), and
// all-to-alls overlapped by a share that depends on the schedule: the search's cached parts and its peak must still
// give estimate()'s numbers for every ranked plan, whatever the order of the space's lists.
TEST_CASE("search: MoE plans with dense layers, MTP and EP overlap carry estimate()'s step and peak") {
  for (const char* name : {"deepseek-v3", "llama4-maverick"}) {
    CAPTURE(name);
    SearchRequest req;
    req.model = test::profiles().model(name, "test");
    req.gpu = test::profiles().gpu("h100-80gb", "test");
    req.cluster = test::profiles().cluster("dgx-h100", "test");
    const bool dsv3 = std::string(name) == "deepseek-v3";
    req.gpus = dsv3 ? 256 : 160;
    req.training.global_batch = dsv3 ? 256 : 160;
    req.training.precision = Precision::fp8;
    req.gpu.memory_bytes = int64_t{1} << 50;  // every valid candidate is ranked and checked
    req.space.tp = {2};
    // DeepSeek-V3 (61 layers, 3 dense) at pp 32: stage 1 holds dense layer 2, stage 2 only MoE layers; Maverick (48
    // layers, every 2nd MoE) at pp 10: stage 1 holds 2 MoE layers, stage 2 three.
    req.space.pp = {dsv3 ? int64_t{32} : int64_t{10}};
    req.space.cp = {1};
    req.space.ep = {8};
    req.space.micro_batch = {1};
    req.space.overlap_ep = true;
    req.space.moe_dispatcher = MoeDispatcher::deepep;
    req.space.schedules = {Schedule::one_f_one_b, Schedule::interleaved, Schedule::zero_bubble};
    req.space.recompute = {Recompute::none, Recompute::selective, Recompute::full};
    req.top_k = 1'000'000;
    const SearchResult res = search(req);
    REQUIRE(res.top.size() >= 8);
    int over_stage_1 = 0;
    for (const Candidate& c : res.top) {
      const Estimate e = estimate(candidate_plan(req, c));
      CHECK(c.time.step_s == e.time.step_s);
      CHECK(c.peak_bytes == e.peak_memory_bytes);
      CHECK(c.peak_stage == e.peak_stage);
      over_stage_1 += c.peak_stage > 1 && c.peak_stage < c.parallel.pp - 1;  // a middle stage past 1 holds the peak
    }
    CHECK(over_stage_1 > 0);
    // The lists in the other order give the same plans and numbers.
    std::reverse(req.space.schedules.begin(), req.space.schedules.end());
    std::reverse(req.space.recompute.begin(), req.space.recompute.end());
    const SearchResult rev = search(req);
    REQUIRE(rev.top.size() == res.top.size());
    for (size_t i = 0; i < res.top.size(); ++i) {
      CHECK(rev.top[i].time.step_s == res.top[i].time.step_s);
      CHECK(rev.top[i].peak_bytes == res.top[i].peak_bytes);
    }
  }
}

TEST_CASE("search: same input gives the same ranking; 1, 2 and 3 threads give identical results") {
  SearchRequest req = small_request(16);
  req.top_k = 20;
  req.explain = true;
  req.training.global_batch = 256;  // so that some plans do not fit (closest)
  const SearchResult a = search(req);
  for (int threads : {1, 2, 3}) {
    req.threads = threads;
    const SearchResult b = search(req);
    CAPTURE(threads);
    CHECK(a.candidates == b.candidates);
    CHECK(a.evaluated == b.evaluated);
    REQUIRE(a.top.size() == b.top.size());
    for (size_t i = 0; i < a.top.size(); ++i) {
      CHECK(same_config(a.top[i].parallel, b.top[i].parallel));
      CHECK(a.top[i].time.step_s == b.top[i].time.step_s);
    }
    for (size_t r = 0; r < a.by_reason.size(); ++r) {
      CHECK(a.by_reason[r].count == b.by_reason[r].count);
      REQUIRE(a.by_reason[r].best.has_value() == b.by_reason[r].best.has_value());
      if (a.by_reason[r].best) CHECK(same_config(a.by_reason[r].best->parallel, b.by_reason[r].best->parallel));
    }
    REQUIRE(b.closest);
    CHECK(same_config(a.closest->parallel, b.closest->parallel));
  }
}

TEST_CASE("search: each rejection reason is counted, and a lifted constraint disappears") {
  SearchRequest req = small_request(32);  // 4 nodes of 8
  SearchResult res = search(req);
  auto count = [&](Reject r) { return res.by_reason[static_cast<size_t>(r)].count; };
  CHECK(count(Reject::tp_crosses_node) > 0);       // tp 16, 32
  CHECK(count(Reject::tp_not_dividing_heads) > 0);  // 16 heads: tp 32
  CHECK(count(Reject::pp_exceeds_layers) > 0);      // 24 layers: pp 32
  CHECK(count(Reject::vpp_invalid) > 0);
  CHECK(count(Reject::sp_without_tp) > 0);
  CHECK(count(Reject::batch_not_divisible) == 0);   // dp divides 64 for every mesh of 32 GPUs
  CHECK(count(Reject::gpu_count_mismatch) == 0);
  for (const Candidate& c : res.top) CHECK(c.reasons == 0);

  req.space.allow_tp_across_nodes = true;
  res = search(req);
  CHECK(count(Reject::tp_crosses_node) == 0);

  req = small_request(8);
  req.training.global_batch = 12;  // dp 8 does not divide 12
  res = search(req);
  CHECK(count(Reject::batch_not_divisible) > 0);

  req = small_request(8);
  req.training.seq_len = 2050;  // 2050 % (2 cp) != 0 for cp 2, 4, 8
  res = search(req);
  CHECK(count(Reject::cp_not_dividing_seq) > 0);

  req = small_request(8);
  req.model = test::profiles().model("mixtral-8x7b", "test");
  req.gpu = test::profiles().gpu("h100-80gb", "test");
  req.space.etp = {0};  // unfolded only: ep divides dp by construction and 8 experts for dp <= 8
  res = search(req);
  CHECK(count(Reject::ep_invalid) == 0);
  req.gpus = 32;
  req.space.tp = {1};
  req.space.pp = {1};
  req.space.cp = {1};
  req.space.ep = {16};  // dp 32: ep 16 does not divide 8 experts
  res = search(req);
  CHECK(count(Reject::ep_invalid) == res.candidates);
  CHECK(res.top.empty());

  req = small_request(8);
  req.training.precision = Precision::fp8;  // A100 has no fp8 peak
  res = search(req);
  CHECK(count(Reject::precision_unsupported) == res.candidates);

  req = small_request(8);
  req.model = infer_gpt_shape(175e9);
  res = search(req);
  CHECK(res.top.empty());
  CHECK(count(Reject::out_of_memory) > 0);
  REQUIRE(res.closest);
  CHECK(res.closest->peak_bytes > res.closest->capacity_bytes);
}

TEST_CASE("search: MoE meshes with expert tensor parallelism (parallel folding) beside the unfolded ones") {
  SearchRequest req = small_request(16);
  req.model = test::profiles().model("mixtral-8x7b", "test");
  req.gpu = test::profiles().gpu("h100-80gb", "test");
  req.cluster = test::profiles().cluster("dgx-h100", "test");
  req.training.global_batch = 64;
  req.space.recompute = {Recompute::full};
  req.space.schedules = {Schedule::one_f_one_b};
  req.space.pp = {2};
  req.space.tp = {2};
  req.top_k = 1000;
  req.space.etp = {0};
  const int64_t unfolded = mesh_count(req, 16);
  req.space.etp = {0, 1};
  // pp 2, tp 2, cp 1, dp 4 (and cp 2 dp 2, cp 4 dp 1): unfolded ep | dp; folded etp 1: ep | tp cp dp = 8.
  CHECK(mesh_count(req, 16) > unfolded);
  const SearchResult res = search(req);
  bool folded_beyond_dp = false;
  for (const Candidate& c : res.top) {
    if (c.parallel.etp == 1 && c.parallel.ep > c.parallel.dp) folded_beyond_dp = true;  // ep 8 over tp 2 x dp 4
    if (c.parallel.etp > 0) CHECK(c.parallel.sequence_parallel);  // folding with tp > 1 needs SP (validate)
  }
  CHECK(folded_beyond_dp);
  // etp = tp with cp 1 is the unfolded layout: not enumerated twice.
  req.space.etp = {0, 2};
  req.space.cp = {1};
  const int64_t with_tp = mesh_count(req, 16);
  req.space.etp = {0};
  CHECK(with_tp == mesh_count(req, 16));
  // Nor is etp = tp with ep 1 at cp > 1 (the experts' data-parallel group is dp x cp either way): at tp 2, cp 2,
  // dp 4, pp 1 the unfolded layouts are ep 1, 2, 4 (ep | dp) and folding with etp 2 adds ep 2, 4, 8 (ep | tp cp dp /
  // etp = 8), not a second ep 1.
  req.space.cp = {2};
  req.space.pp = {1};
  req.space.etp = {0};
  CHECK(mesh_count(req, 16) == 3);
  req.space.etp = {0, 2};
  CHECK(mesh_count(req, 16) == 6);
  // Pinned to etp = tp, the folded layouts are the ones asked for, ep 1 and cp 1 included.
  req.space.cp = {1};
  req.space.etp = {2};
  req.space.ep = {1};
  const SearchResult pinned = search(req);
  REQUIRE_FALSE(pinned.top.empty());
  CHECK(pinned.top.front().parallel.etp == 2);
}

TEST_CASE("search: --explain keeps the best single-reason rejection, estimated as if allowed") {
  SearchRequest req = small_request(16);
  req.explain = true;
  const SearchResult res = search(req);
  const auto& tc = res.by_reason[static_cast<size_t>(Reject::tp_crosses_node)];
  REQUIRE(tc.best);
  CHECK(tc.best->parallel.tp == 16);
  CHECK(tc.best->reasons == (1u << static_cast<int>(Reject::tp_crosses_node)));
  CHECK(tc.best->has_time);
  // It is the best among its kind: a search with the constraint lifted and tp pinned to 16 finds the same plan.
  SearchRequest lifted = req;
  lifted.explain = false;
  lifted.space.allow_tp_across_nodes = true;
  lifted.space.tp = {16};
  const SearchResult l = search(lifted);
  REQUIRE(!l.top.empty());
  CHECK(same_config(l.top[0].parallel, tc.best->parallel));
  CHECK(l.top[0].time.step_s == tc.best->time.step_s);
}

TEST_CASE("search: --explain's best rejection for a reason breaks that rule alone (not also the host memory)") {
  // Offload sets searched on a node with little host memory: many candidates rejected for a rule also overflow the
  // host; none of those is shown as the reason's "if allowed" plan.
  // GPT-3 175B on 64 A100-40GB fits only with offload (suggest's --explain showed an sp_without_tp plan at 327.7 s,
  // faster than the winner's 360.7 s, whose offloaded states needed 5.14 TiB per node against 1 TiB).
  SearchRequest req = small_request(64);
  req.model = test::profiles().model("gpt3-175b", "test");
  req.training.global_batch = 512;
  req.explain = true;
  req.space.offload = {OffloadSet{}, OffloadSet{.optimizer = true, .params = true, .activations = true}};
  const SearchResult res = search(req);
  int timed = 0;
  for (int r = 0; r < kNumRejects; ++r) {
    const auto& best = res.by_reason[static_cast<size_t>(r)].best;
    if (!best || !best->has_time || static_cast<Reject>(r) == Reject::out_of_memory) continue;
    CAPTURE(reject_name(static_cast<Reject>(r)));
    const Plan plan = candidate_plan(req, *best);
    ++timed;
    if (plan.parallel.offloads_any()) CHECK(estimate(plan).host_fits);
  }
  CHECK(timed > 0);
  CHECK(res.by_reason[static_cast<size_t>(Reject::host_out_of_memory)].count > 0);
}

TEST_CASE("search: objectives (headroom order, pins, fewest GPUs reaching a throughput)") {
  SearchRequest req = small_request(8);
  req.objective = Objective::headroom;
  req.top_k = 10;
  SearchResult res = search(req);
  REQUIRE(res.top.size() == 10);
  for (size_t i = 1; i < res.top.size(); ++i) CHECK(res.top[i - 1].peak_bytes <= res.top[i].peak_bytes);

  req = small_request(8);
  req.space.tp = {2};
  req.space.schedules = {Schedule::one_f_one_b};
  req.space.recompute = {Recompute::full};
  res = search(req);
  REQUIRE(!res.top.empty());
  for (const Candidate& c : res.top) {
    CHECK(c.parallel.tp == 2);
    CHECK(c.parallel.schedule == Schedule::one_f_one_b);
    CHECK(c.parallel.recompute == Recompute::full);
  }

  // Fewest GPUs: the throughput of the best 4-GPU plan is reachable on 4 GPUs but not on 1 or 2.
  req = small_request(4);
  const double four = search(req).top.at(0).time.tokens_per_s;
  req = small_request(64);
  req.objective = Objective::fewest_gpus;
  req.min_tokens_per_s = four * 0.999;
  res = search(req);
  REQUIRE(!res.top.empty());
  CHECK(res.top[0].num_gpus == 4);
  for (const Candidate& c : res.top) CHECK(c.time.tokens_per_s >= req.min_tokens_per_s);
  REQUIRE(res.gpu_counts.size() >= 3);  // stops once top_k plans reach the throughput
  CHECK(std::vector<int64_t>(res.gpu_counts.begin(), res.gpu_counts.begin() + 3) == std::vector<int64_t>{1, 2, 4});
  ClusterSpec eight;
  eight.gpus_per_node = 8;
  CHECK(fewest_gpus_counts(200, eight) == std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96,
                                                               104, 112, 120, 128, 160, 192, 200});
  // After 16 nodes: 20, 24, 28, 32, 40, 48, 56, 64, 80 ... nodes ({4,5,6,7} x 2^k).
  CHECK(fewest_gpus_counts(1024, eight) == std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96,
                                                                104, 112, 120, 128, 160, 192, 224, 256, 320, 384, 448,
                                                                512, 640, 768, 896, 1024});
  // NVL72 (trays of 4 in a 72-GPU NVLink domain): whole trays and whole racks (72, 144, 216, ...).
  ClusterSpec nvl72;
  nvl72.gpus_per_node = 4;
  nvl72.nvlink_domain_gpus = 72;
  CHECK(fewest_gpus_counts(300, nvl72) == std::vector<int64_t>{1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52,
                                                               56, 60, 64, 72, 80, 96, 112, 128, 144, 160, 192, 216,
                                                               224, 256, 288, 300});
}

TEST_CASE("state floor: 175B with Adam is 16 bytes/param with 16-bit gradients, 43.6 GB per GPU on 64: over 40 GiB") {
  SearchRequest req;
  req.model = infer_gpt_shape(175e9);
  req.gpu = test::profiles().gpu("a100-40gb", "test");
  req.training.precision = Precision::bf16;
  req.training.grad_fp32 = true;
  const StateFloor f = state_floor(req, 64);
  const double P = static_cast<double>(total_params(req.model));
  CHECK(f.bytes_per_param == 18.0);  // 2 weights + 4 fp32 gradients + 12 Adam (model_states.hpp)
  CHECK(f.bytes_per_param_16bit_grads == 16.0);
  CHECK(f.per_gpu_bytes_16bit_grads == doctest::Approx(P * 16 / 64));
  CHECK(f.per_gpu_bytes_16bit_grads > 43e9);
  CHECK_FALSE(f.fits);
  CHECK(f.min_gpus * (f.capacity_bytes - f.fixed_bytes_per_gpu) >= f.total_bytes);
  CHECK((f.min_gpus - 1) * (f.capacity_bytes - f.fixed_bytes_per_gpu) < f.total_bytes);
  req.gpu = test::profiles().gpu("h100-80gb", "test");
  CHECK(state_floor(req, 64).fits);
  // fp8: a fully sharded candidate gathers its weights in fp8 (candidate_fp8_weights), keeping no fp8 copy beside the
  // 16-bit weights, so the floor stays 18 bytes/param; pinned without the fp8 gather, Transformer Engine's fp8 weight
  // and transpose copies add 2.
  req.gpu = test::profiles().gpu("h800", "test");
  req.training.precision = Precision::fp8;
  const StateFloor fp8 = state_floor(req, 64);
  CHECK(fp8.bytes_per_param == 18.0);
  CHECK(fp8.fp8_copy_bytes_per_param == 0.0);
  req.space.fp8_param_gather = false;
  const StateFloor copies = state_floor(req, 64);
  CHECK(copies.bytes_per_param == 20.0);
  CHECK(copies.fp8_copy_bytes_per_param == 2.0);
}

TEST_CASE("rank reasons name what a plan trades against the winner") {
  SearchRequest req = small_request(8);
  req.top_k = 3;
  const SearchResult res = search(req);
  REQUIRE(res.top.size() == 3);
  CHECK(rank_reason(res.top[0], res.top[0], 1, Objective::fastest) == "fastest step that fits");
  const std::string r2 = rank_reason(res.top[1], res.top[0], 2, Objective::fastest);
  CHECK((r2.find("step time") != std::string::npos));
  // By hand: the EP all-to-all is its own term (it was counted as CP comm), and a term that shrank by a quarter or
  // more of the largest growth is named beside it, since the step changes by their sum.
  Candidate w = res.top[0], c = res.top[0];
  w.time = TimeBreakdown{};
  c.time = TimeBreakdown{};
  w.time.step_s = 10.0;
  c.time.step_s = 10.006;
  w.time.compute_s = 8.0;
  c.time.compute_s = 8.606;
  w.time.ep_comm_s = 1.0;
  c.time.ep_comm_s = 0.4;
  CHECK(rank_reason(c, w, 2, Objective::fastest).starts_with(
      "+0.1% step time: more compute (+0.606 s), less EP all-to-all (-0.6 s); "));
  c.time.ep_comm_s = 1.1;
  c.time.step_s = 10.706;
  CHECK(rank_reason(c, w, 2, Objective::fastest).starts_with("+7.1% step time: more compute (+0.606 s); "));
}

TEST_CASE("ranking: steps within one part in a million tie, and the plan with less memory ranks first") {
  CHECK(step_rank_key(154.74578555594448) == step_rank_key(154.74578555594454));
  CHECK(step_rank_key(1.0) < step_rank_key(1.0 + 2e-6));
  CHECK(step_rank_key(0.0) == 0.0);
  CHECK(step_rank_key(3e-7) == doctest::Approx(3e-7).scale(0).epsilon(1e-6));
  Candidate a, b;
  a.has_time = b.has_time = a.has_memory = b.has_memory = true;
  a.time.step_s = 154.74578555594448;  // suggest's #1 and #2 once: 6e-14 s apart, #1 with 0.04 GiB more memory
  b.time.step_s = 154.74578555594454;
  a.peak_bytes = 63.92 * (1 << 30);
  b.peak_bytes = 63.88 * (1 << 30);
  CHECK(ranks_before(b, a, Objective::fastest));
  CHECK_FALSE(ranks_before(a, b, Objective::fastest));
  b.time.step_s = 154.75;  // 3e-5 apart: step time decides again
  CHECK(ranks_before(a, b, Objective::fastest));
}

// Full recompute of the first K layers of each chunk (SearchSpace::recompute_layers unset): GPT-3 175B on 64 H100s
// under a 57 GiB budget. Pinned to every layer (K = 0, the search before recompute_layers was searched), nothing
// faster than full recompute fits; searched, the winner recomputes only the first K layers of each chunk, a faster
// step, and K is the smallest that fits: K - 1 is over the budget by the memory model (peak_memory_bytes).
TEST_CASE("search: full recompute of only the first K layers of each chunk, the smallest K that fits, beats every layer's") {
  SearchRequest req;
  req.model = test::profiles().model("gpt3-175b", "test");
  req.gpu = test::profiles().gpu("H100-SXM5-80GB", "test");
  req.cluster = test::profiles().cluster("dgx-h100", "test");
  req.gpus = 64;
  req.training.global_batch = 2048;
  req.training.seq_len = 2048;
  req.memory_bytes = int64_t{57} << 30;
  req.threads = 2;

  SearchRequest every = req;
  every.space.recompute_layers = 0;
  const SearchResult before = search(every);
  REQUIRE(!before.top.empty());
  CHECK(before.top[0].parallel.recompute == Recompute::full);
  for (const Candidate& c : before.top) CHECK(c.parallel.recompute_layers == 0);

  const SearchResult res = search(req);
  REQUIRE(!res.top.empty());
  const Candidate& w = res.top[0];
  const int64_t k = w.parallel.recompute_layers;
  CHECK(w.parallel.recompute == Recompute::full);
  REQUIRE(k >= 2);  // K - 1 is a partial recompute too
  CHECK(w.time.step_s < before.top[0].time.step_s);

  const Plan p = candidate_plan(req, w);
  CHECK(k < largest_chunk_layers(p));
  CHECK(peak_memory_bytes(p) <= w.limit_bytes);
  Plan fewer = p;
  fewer.parallel.recompute_layers = k - 1;
  CHECK(peak_memory_bytes(fewer) > w.limit_bytes);
  Plan none = p;  // and no recompute at all does not fit either (else the search tries no K: none is faster)
  none.parallel.recompute = Recompute::none;
  none.parallel.recompute_layers = 0;
  CHECK(peak_memory_bytes(none) > w.limit_bytes);
  // The same plan with every layer recomputed fits and is slower: time rises with K.
  Plan all = p;
  all.parallel.recompute_layers = 0;
  CHECK(peak_memory_bytes(all) <= w.limit_bytes);
  CHECK(estimate(all).time.step_s > w.time.step_s);

  // Pinned (suggest --recompute-layers K): every full recompute plan uses that K; the winner is the same plan.
  SearchRequest pinned = req;
  pinned.space.recompute_layers = k;
  const SearchResult pr = search(pinned);
  REQUIRE(!pr.top.empty());
  CHECK(same_config(pr.top[0].parallel, w.parallel));
  for (const Candidate& c : pr.top) {
    if (c.parallel.recompute == Recompute::full) CHECK(c.parallel.recompute_layers == k);
  }
  for (const Candidate& c : res.top) {  // a searched K only ever comes with full recompute
    if (c.parallel.recompute != Recompute::full) CHECK(c.parallel.recompute_layers == 0);
  }
}

TEST_CASE("search: HSDP where it is fastest (Llama 3 8B on 256 H100s), its shard group whole nodes; pins rejected") {
  SearchRequest req;
  req.model = test::profiles().model("llama3-8b", "test");
  req.gpu = test::profiles().gpu("h100", "test");
  req.cluster = test::profiles().cluster("dgx-h100", "test");
  req.gpus = 256;
  req.training.global_batch = 512;
  req.threads = 2;
  const SearchResult res = search(req);
  REQUIRE(!res.top.empty());
  const ParallelConfig& w = res.top[0].parallel;
  CAPTURE(w.dp_replicate);
  CHECK(w.dp_replicate > 1);
  CHECK(w.shards_optimizer());
  const int64_t block = w.tp * w.cp * w.dp_shard();
  CHECK(block % req.cluster.placed_domain(req.gpus) == 0);  // the shard group fills whole nodes
  const Estimate e = estimate(candidate_plan(req, res.top[0]));
  CHECK(e.time.step_s == res.top[0].time.step_s);
  CHECK(e.dp.replica_reduce_s > 0);
  // Without HSDP (pinned to 1) the best plan is slower.
  SearchRequest flat = req;
  flat.space.dp_replicate = {1};
  const SearchResult f = search(flat);
  REQUIRE(!f.top.empty());
  CHECK(f.top[0].parallel.dp_replicate == 1);
  CHECK(f.top[0].time.step_s > res.top[0].time.step_s);
  CHECK(res.candidates > f.candidates);
  CHECK(f.by_reason[static_cast<size_t>(Reject::dp_replicate_invalid)].count == 0);
  // A pinned count that does not apply (3 divides no power-of-two dp; unsharded plans) is a rejection reason.
  SearchRequest pinned = req;
  pinned.space.dp_replicate = {3};
  const SearchResult p = search(pinned);
  CHECK(p.top.empty());
  CHECK(p.by_reason[static_cast<size_t>(Reject::dp_replicate_invalid)].count == p.candidates);
}

// On GB200 NVL72 (72-GPU NVLink domains) shard groups that divide the domain keep the reduce-scatter on NVLink where
// a whole-domain one would straddle a domain edge: the unpinned search tries them, so its #1 is never slower than the
// #1 of any pinned replica count.
TEST_CASE("search: on GB200 NVL72 the unpinned #1 is at least as fast as every pinned replica count's #1") {
  SearchRequest req;
  req.model = test::profiles().model("llama3-8b", "test");
  req.gpu = test::profiles().gpu("gb200", "test");
  req.cluster = test::profiles().cluster("gb200-nvl72", "test");
  req.gpus = 144;
  req.training.global_batch = 512;
  req.threads = 2;
  const SearchResult res = search(req);
  REQUIRE(!res.top.empty());
  CHECK(res.top[0].parallel.dp_replicate > 1);
  for (int64_t r : {2, 3, 4, 6, 8, 9, 12, 16, 18, 24, 36, 48, 72}) {
    CAPTURE(r);
    SearchRequest pinned = req;
    pinned.space.dp_replicate = {r};
    const SearchResult p = search(pinned);
    if (!p.top.empty()) CHECK(res.top[0].time.step_s <= p.top[0].time.step_s);
  }
}
