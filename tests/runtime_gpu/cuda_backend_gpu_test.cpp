// GPU tests of the cuda backend: cuBLAS/cuBLASLt GEMMs against the host GEMM, pool accounting, NCCL collectives.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "planner/spec/error.hpp"
#include "runtime/backend.hpp"
#include "runtime/collective_bytes.hpp"
#include "runtime/host_gemm.hpp"
#include "runtime/host_numeric.hpp"

using namespace parplan;
using namespace parplan::runtime;

namespace {

std::vector<unsigned char> small_ints(int64_t elems, DType d, std::mt19937& rng) {
  std::vector<unsigned char> v(static_cast<size_t>(elems * element_bytes(d)));
  std::uniform_int_distribution<int> dist(-3, 3);
  for (int64_t i = 0; i < elems; ++i) host::store(v.data(), i, d, static_cast<float>(dist(rng)));
  return v;
}

// Runs one GEMM on GPU 0 and on the host; integer data keeps both exact, so the outputs must be equal.
void compare_gemm(const GemmShape& s) {
  std::mt19937 rng(11);
  auto a = small_ints(s.m * s.k * s.batch, s.dtype, rng);
  auto b = small_ints(s.n * s.k * s.batch, s.dtype, rng);
  std::vector<unsigned char> want(static_cast<size_t>(s.c_bytes())), got(want.size());
  host::gemm_reference(s, a.data(), b.data(), want.data());
  auto world = make_cuda_world(1);
  world->run([&](Device& dev) {
    Buffer da = dev.allocate(s.a_bytes()), db = dev.allocate(s.b_bytes()), dc = dev.allocate(s.c_bytes());
    dev.upload(da, a.data(), s.a_bytes());
    dev.upload(db, b.data(), s.b_bytes());
    dev.gemm(s, da, db, dc);
    dev.download(got.data(), dc, s.c_bytes());
    for (Buffer x : {da, db, dc}) dev.free(x);
  });
  CHECK(got == want);
}

}  // namespace

TEST_CASE("cuBLAS bf16 / fp16 / fp32 GEMMs equal the host GEMM on integer data, both B layouts, batched") {
  for (DType d : {DType::bf16, DType::fp16, DType::fp32}) {
    for (bool bt : {true, false}) {
      CAPTURE(static_cast<int>(d));
      compare_gemm(GemmShape{.m = 96, .n = 80, .k = 64, .batch = 3, .dtype = d, .b_transposed = bt});
    }
  }
}

TEST_CASE("cuBLASLt fp8 GEMM equals the host GEMM where the GPU supports fp8") {
  auto world = make_cuda_world(1);
  bool fp8 = false;
  world->run([&](Device& dev) { fp8 = dev.info().supports_fp8; });
  if (!fp8) return;
  compare_gemm(GemmShape{.m = 64, .n = 64, .k = 64, .batch = 1, .dtype = DType::fp8, .b_transposed = true});
}

TEST_CASE("pool allocations are counted exactly and the pool's high-water mark covers them") {
  auto world = make_cuda_world(1);
  world->run([&](Device& dev) {
    dev.reset_peak();
    Buffer a = dev.allocate(64 << 20), b = dev.allocate(3 << 20);
    dev.free(a);
    Buffer c = dev.allocate(1 << 20);
    dev.synchronize();
    MemoryStats m = dev.memory_stats();
    CHECK(m.allocated_bytes == (4 << 20));
    CHECK(m.peak_allocated_bytes == (67 << 20));
    CHECK(m.pool_reserved_peak_bytes >= (67 << 20));
    CHECK(m.device_total_bytes > m.device_free_bytes);
    dev.free(b);
    dev.free(c);
    CHECK_THROWS_AS(dev.free(Buffer{&m, 4}), BackendError);
  });
}

TEST_CASE("NCCL all_reduce over every local GPU sums and logs ring bytes") {
  const int n = detect_cuda().device_count;
  auto world = make_cuda_world(n);
  world->run([&](Device& dev) {
    auto comm = dev.split(0, dev.rank());
    const int64_t count = 1 << 20;
    std::vector<float> host(count, static_cast<float>(dev.rank() + 1));
    Buffer b = dev.allocate(count * 4);
    dev.upload(b, host.data(), count * 4);
    comm->all_reduce(b, b, count, DType::fp32);
    dev.download(host.data(), b, count * 4);
    CHECK(host[count - 1] == static_cast<float>(n * (n + 1) / 2));
    CHECK(dev.collective_log().back().bytes_sent == ring_bytes_sent(CollectiveKind::all_reduce, count * 4, n));
    dev.free(b);
  });
}

TEST_CASE("NCCL all_to_all over every local GPU: block p of a rank's send lands in rank p's receive, ring bytes logged") {
  const int n = detect_cuda().device_count;
  auto world = make_cuda_world(n);
  world->run([&](Device& dev) {
    auto comm = dev.split(0, dev.rank());
    const int64_t per = 1 << 16, bytes = per * n * 4;  // elements per peer; the whole buffer
    std::vector<float> host(static_cast<size_t>(per * n));
    for (int p = 0; p < n; ++p) std::fill_n(host.begin() + p * per, per, static_cast<float>(100 * dev.rank() + p));
    Buffer send = dev.allocate(bytes), recv = dev.allocate(bytes);
    dev.upload(send, host.data(), bytes);
    comm->all_to_all(send, recv, per, DType::fp32);
    dev.download(host.data(), recv, bytes);
    for (int p = 0; p < n; ++p) {
      CHECK(host[static_cast<size_t>(p * per)] == static_cast<float>(100 * p + dev.rank()));
      CHECK(host[static_cast<size_t>((p + 1) * per - 1)] == static_cast<float>(100 * p + dev.rank()));
    }
    CHECK(dev.collective_log().back().bytes_sent == ring_bytes_sent(CollectiveKind::all_to_all, bytes, n));
    dev.free(send);
    dev.free(recv);
  });
}

TEST_CASE("CUDA events time a GEMM") {
  auto world = make_cuda_world(1);
  world->run([&](Device& dev) {
    GemmShape s{.m = 4096, .n = 4096, .k = 4096, .dtype = DType::bf16};
    Buffer a = dev.allocate(s.a_bytes()), b = dev.allocate(s.b_bytes()), c = dev.allocate(s.c_bytes());
    Event e0 = dev.record(Stream::compute);
    dev.gemm(s, a, b, c);
    Event e1 = dev.record(Stream::compute);
    dev.synchronize();
    const double t = dev.elapsed_s(e0, e1);
    CHECK(t > 0.0);
    CHECK(t < 1.0);
    for (Buffer x : {a, b, c}) dev.free(x);
  });
}

TEST_CASE("allocations hold the deterministic fill pattern: finite, not zeros, equal across runs") {
  const int64_t bytes = (int64_t{40} << 20) + 6;  // more than the 16 MiB pattern: the doubling copies too
  std::vector<uint16_t> first(static_cast<size_t>(bytes / 2)), second(first.size());
  for (auto* out : {&first, &second}) {
    auto world = make_cuda_world(1);
    world->run([&](Device& dev) {
      Buffer a = dev.allocate(bytes);
      dev.download(out->data(), a, bytes);
      dev.free(a);
    });
  }
  CHECK(first == second);
  const size_t period = size_t{8} << 20;  // 16 MiB of 16-bit words
  CHECK(std::equal(first.begin(), first.begin() + 1000, first.begin() + period));
  size_t zeros = 0;
  for (uint16_t w : first) {
    REQUIRE(std::isfinite(host::bf16_to_float(w)));
    REQUIRE(std::fabs(host::bf16_to_float(w)) <= 1.0f);
    zeros += (w & 0x7FFF) == 0;
  }
  CHECK(zeros < first.size() / 1000);
  auto world = make_cuda_world(1);
  world->run([&](Device& dev) {
    Buffer a = dev.allocate(1 << 20), b = dev.allocate(1 << 20, Fill::none);
    dev.synchronize();
    CHECK(dev.memory_stats().allocated_bytes == (2 << 20));
    dev.free(a);
    dev.free(b);
  });
}
