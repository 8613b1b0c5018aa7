// Tests for the host backend's shared-memory collectives: correct sums and exact bytes sent per rank.
#include <doctest/doctest.h>

#include <atomic>
#include <numeric>
#include <vector>

#include "planner/spec/error.hpp"
#include "runtime/backend.hpp"
#include "runtime/collective_bytes.hpp"
#include "runtime/host_collectives.hpp"
#include "runtime/host_numeric.hpp"

using namespace parplan;
using namespace parplan::runtime;

namespace {

// Fills element i of rank r's buffer with (r + 1) * (i % 7 + 1): small integers, sums exact in bf16 and fp32.
void fill(Buffer b, int64_t count, DType d, int r) {
  for (int64_t i = 0; i < count; ++i) host::store(b.ptr, i, d, static_cast<float>((r + 1) * (i % 7 + 1)));
}

}  // namespace

TEST_CASE("ring_chunk splits like NCCL: near-equal, covering, in order") {
  int64_t next = 0;
  for (int c = 0; c < 3; ++c) {
    auto [b, e] = host::ring_chunk(10, 3, c);
    CHECK(b == next);
    CHECK(e - b == (c == 0 ? 4 : 3));
    next = e;
  }
  CHECK(next == 10);
}

TEST_CASE("all_reduce sums and sends 2(n-1)/n * S bytes per rank") {
  for (int n : {1, 2, 3, 4, 8}) {
    for (DType d : {DType::fp32, DType::bf16}) {
      const int64_t count = 840;  // divisible by 1..8
      auto world = make_host_world(n);
      std::vector<std::vector<float>> got(n);
      std::vector<int64_t> sent(n);
      world->run([&](Device& dev) {
        auto comm = dev.split(0, dev.rank());
        Buffer s = dev.allocate(count * element_bytes(d)), r = dev.allocate(count * element_bytes(d));
        fill(s, count, d, dev.rank());
        comm->all_reduce(s, r, count, d);
        got[dev.rank()].resize(count);
        host::load_range(r.ptr, 0, count, d, got[dev.rank()].data());
        REQUIRE(dev.collective_log().size() == 1);
        sent[dev.rank()] = dev.collective_log()[0].bytes_sent;
        dev.free(s);
        dev.free(r);
      });
      const int64_t S = count * element_bytes(d);
      const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
      for (int r = 0; r < n; ++r) {
        CAPTURE(n);
        CHECK(sent[r] == ring_bytes_sent(CollectiveKind::all_reduce, S, n));
        CHECK(sent[r] == 2 * (n - 1) * S / n);
        for (int64_t i = 0; i < count; i += 13) CHECK(got[r][i] == ranks_sum * static_cast<float>(i % 7 + 1));
      }
    }
  }
}

TEST_CASE("all_reduce with a count not divisible by n: each rank sends all chunks but the two it receives last") {
  const int n = 3;
  const int64_t count = 10;
  auto world = make_host_world(n);
  std::vector<int64_t> sent(n);
  world->run([&](Device& dev) {
    auto comm = dev.split(7, dev.rank());
    Buffer b = dev.allocate(count * 4);
    fill(b, count, DType::fp32, dev.rank());
    comm->all_reduce(b, b, count, DType::fp32);  // in place
    for (int64_t i = 0; i < count; ++i) CHECK(host::load(b.ptr, i, DType::fp32) == 6.0f * static_cast<float>(i % 7 + 1));
    sent[dev.rank()] = dev.collective_log().at(0).bytes_sent;
    CHECK(dev.collective_log().at(0).comm_color == 7);
    dev.free(b);
  });
  for (int r = 0; r < n; ++r) {
    auto c1 = host::ring_chunk(count, n, (r + 1) % n), c2 = host::ring_chunk(count, n, (r + 2) % n);
    CHECK(sent[r] == (2 * count - (c1.second - c1.first) - (c2.second - c2.first)) * 4);
  }
}

TEST_CASE("all_gather, reduce_scatter and all_to_all move the right data and (n-1)/n * S bytes") {
  for (int n : {2, 4, 8}) {
    const int64_t per = 6;
    auto world = make_host_world(n);
    world->run([&](Device& dev) {
      const int r = dev.rank();
      auto comm = dev.split(0, r);
      Buffer mine = dev.allocate(per * 4), all = dev.allocate(per * n * 4), out = dev.allocate(per * n * 4);
      for (int64_t i = 0; i < per; ++i) host::store(mine.ptr, i, DType::fp32, static_cast<float>(r * 100 + i));
      comm->all_gather(mine, all, per, DType::fp32);
      for (int q = 0; q < n; ++q) CHECK(host::load(all.ptr, q * per + 5, DType::fp32) == static_cast<float>(q * 100 + 5));
      // reduce_scatter of `all` (identical on every rank): block r summed n times.
      comm->reduce_scatter(all, mine, per, DType::fp32);
      CHECK(host::load(mine.ptr, 2, DType::fp32) == static_cast<float>(n * (r * 100 + 2)));
      // all_to_all: block q of my send goes to rank q; my recv block q comes from rank q's block r.
      for (int q = 0; q < n; ++q) {
        for (int64_t i = 0; i < per; ++i) host::store(all.ptr, q * per + i, DType::fp32, static_cast<float>(r * 1000 + q));
      }
      comm->all_to_all(all, out, per, DType::fp32);
      for (int q = 0; q < n; ++q) CHECK(host::load(out.ptr, q * per, DType::fp32) == static_cast<float>(q * 1000 + r));
      const auto& log = dev.collective_log();
      REQUIRE(log.size() == 3);
      const int64_t S = per * n * 4;
      CHECK(log[0].kind == CollectiveKind::all_gather);
      CHECK(log[0].payload_bytes == S);
      CHECK(log[0].bytes_sent == (n - 1) * S / n);
      CHECK(log[1].kind == CollectiveKind::reduce_scatter);
      CHECK(log[1].bytes_sent == (n - 1) * S / n);
      CHECK(log[2].kind == CollectiveKind::all_to_all);
      CHECK(log[2].bytes_sent == (n - 1) * S / n);
      for (Buffer b : {mine, all, out}) dev.free(b);
    });
  }
}

TEST_CASE("split forms groups by colour ordered by key, and groups reduce independently") {
  auto world = make_host_world(8);
  world->run([&](Device& dev) {
    const int r = dev.rank();
    auto tp = dev.split(r / 2, r);       // pairs {0,1}, {2,3}, ...
    auto dp = dev.split(100 + r % 2, -r);  // evens and odds, ordered by descending world rank
    CHECK(tp->size() == 2);
    CHECK(tp->rank() == r % 2);
    CHECK(dp->size() == 4);
    CHECK(dp->rank() == 3 - r / 2);
    Buffer b = dev.allocate(4);
    host::store(b.ptr, 0, DType::fp32, static_cast<float>(r));
    tp->all_reduce(b, b, 1, DType::fp32);
    CHECK(host::load(b.ptr, 0, DType::fp32) == static_cast<float>(4 * (r / 2) + 1));
    host::store(b.ptr, 0, DType::fp32, static_cast<float>(r));
    dp->all_reduce(b, b, 1, DType::fp32);
    CHECK(host::load(b.ptr, 0, DType::fp32) == static_cast<float>(r % 2 == 0 ? 12 : 16));
    dev.free(b);
  });
}

TEST_CASE("p2p: opposite sends do not deadlock and carry the data; sizes must match") {
  auto world = make_host_world(2);
  world->run([&](Device& dev) {
    auto comm = dev.split(0, dev.rank());
    const int peer = 1 - dev.rank();
    Buffer out = dev.allocate(64), in = dev.allocate(64);
    host::store(out.ptr, 0, DType::fp32, static_cast<float>(dev.rank() + 40));
    // Both ranks send first, in separate calls: the eager protocol completes.
    P2POp send{true, peer, out, 16, DType::fp32};
    P2POp recv{false, peer, in, 16, DType::fp32};
    comm->p2p(std::span(&send, 1));
    comm->p2p(std::span(&recv, 1));
    CHECK(host::load(in.ptr, 0, DType::fp32) == static_cast<float>(peer + 40));
    const auto& log = dev.collective_log();
    REQUIRE(log.size() == 2);
    CHECK(log[0].kind == CollectiveKind::send);
    CHECK(log[0].bytes_sent == 64);
    CHECK(log[1].kind == CollectiveKind::recv);
    CHECK(log[1].bytes_sent == 0);
    dev.free(out);
    dev.free(in);
  });
  auto bad = make_host_world(2);
  CHECK_THROWS_AS(bad->run([&](Device& dev) {
    auto comm = dev.split(0, dev.rank());
    Buffer b = dev.allocate(64);
    P2POp op{dev.rank() == 0, 1 - dev.rank(), b, dev.rank() == 0 ? 16 : 8, DType::fp32};
    comm->p2p(std::span(&op, 1));
    dev.free(b);
  }), BackendError);
}

TEST_CASE("a failing rank aborts the others instead of hanging, and its own error is the one reported") {
  auto world = make_host_world(4);
  try {
    world->run([&](Device& dev) {
      auto comm = dev.split(0, dev.rank());
      if (dev.rank() == 2) throw BackendError("rank 2 failed on purpose");
      comm->barrier();  // would wait forever for rank 2 without the abort
    });
    FAIL("run() should have thrown");
  } catch (const BackendError& e) {
    CHECK(std::string(e.what()) == "rank 2 failed on purpose");
  }
  // The world is usable again afterwards.
  std::atomic<int> done{0};
  world->run([&](Device& dev) {
    auto comm = dev.split(0, dev.rank());
    comm->barrier();
    ++done;
  });
  CHECK(done == 4);
}

TEST_CASE("collective buffers that are too small are reported, not overrun") {
  auto world = make_host_world(2);
  CHECK_THROWS_AS(world->run([&](Device& dev) {
    auto comm = dev.split(0, dev.rank());
    Buffer b = dev.allocate(8);
    try {
      comm->all_reduce(b, b, 4, DType::fp32);
    } catch (...) {
      dev.free(b);
      throw;
    }
  }), BackendError);
}
