// Tests for the host Device: exact allocation accounting, memory-bound ops, timing events, GEMM checks.
#include <doctest/doctest.h>

#include <cstring>

#include "planner/spec/error.hpp"
#include "runtime/backend.hpp"
#include "runtime/host_numeric.hpp"

using namespace parplan;
using namespace parplan::runtime;

TEST_CASE("allocation accounting is exact: current, peak, reset") {
  auto world = make_host_world(1);
  world->run([](Device& dev) {
    Buffer a = dev.allocate(1000), b = dev.allocate(3);
    CHECK(dev.memory_stats().allocated_bytes == 1003);
    dev.free(a);
    Buffer c = dev.allocate(500);
    auto m = dev.memory_stats();
    CHECK(m.allocated_bytes == 503);
    CHECK(m.peak_allocated_bytes == 1003);
    CHECK(m.device_total_bytes > 0);
    dev.reset_peak();
    CHECK(dev.memory_stats().peak_allocated_bytes == 503);
    CHECK(static_cast<unsigned char*>(c.ptr)[499] == 0);  // zero-filled
    CHECK(!dev.allocate(0));
    CHECK_THROWS_AS(dev.allocate(-1), BackendError);
    CHECK_THROWS_AS(dev.free(Buffer{&m, 4}), BackendError);
    dev.free(b);
    dev.free(c);
    CHECK(dev.memory_stats().allocated_bytes == 0);
  });
}

TEST_CASE("memory_op copies the bytes and checks sizes") {
  auto world = make_host_world(1);
  world->run([](Device& dev) {
    Buffer s = dev.allocate(256), d = dev.allocate(256);
    std::memset(s.ptr, 0xab, 256);
    dev.memory_op(s, d, 200);
    CHECK(static_cast<unsigned char*>(d.ptr)[199] == 0xab);
    CHECK(static_cast<unsigned char*>(d.ptr)[200] == 0);
    CHECK_THROWS_AS(dev.memory_op(s, d, 300), BackendError);
    dev.free(s);
    dev.free(d);
  });
}

TEST_CASE("events measure elapsed time in order") {
  auto world = make_host_world(1);
  world->run([](Device& dev) {
    Event a = dev.record(Stream::compute);
    Buffer x = dev.allocate(256 * 256 * 4), y = dev.allocate(256 * 256 * 4);
    dev.gemm(GemmShape{.m = 256, .n = 256, .k = 256, .dtype = DType::fp32}, x, x, y);
    Event b = dev.record(Stream::compute);
    dev.synchronize();
    CHECK(dev.elapsed_s(a, b) > 0.0);
    CHECK(dev.elapsed_s(a, b) < 60.0);
    CHECK_THROWS_AS(dev.elapsed_s(a, Event{99}), BackendError);
    dev.reset_events();
    CHECK_THROWS_AS(dev.elapsed_s(a, b), BackendError);
    dev.free(x);
    dev.free(y);
  });
}

TEST_CASE("gemm rejects operands smaller than the shape") {
  auto world = make_host_world(1);
  world->run([](Device& dev) {
    Buffer a = dev.allocate(16), b = dev.allocate(16), c = dev.allocate(8);
    CHECK_THROWS_AS(dev.gemm(GemmShape{.m = 2, .n = 2, .k = 2, .dtype = DType::fp32}, a, b, c), BackendError);
    dev.gemm(GemmShape{.m = 2, .n = 1, .k = 2, .dtype = DType::fp32}, a, b, c);  // fits
    for (Buffer x : {a, b, c}) dev.free(x);
  });
}

TEST_CASE("cuda detection reports a reason instead of failing when no GPU is usable") {
  CudaAvailability a = detect_cuda();
  if (!a.available) {
    CHECK(a.reason.find("no usable GPU") != std::string::npos);
    CHECK(a.reason.find("driver version is insufficient") == std::string::npos);  // not the runtime's words for it
    CHECK_THROWS_AS(make_cuda_world(1), BackendError);
  } else {
    CHECK(a.device_count > 0);
  }
}

TEST_CASE("the CUDA backend plugin is looked for: $PARPLAN_CUDA_PLUGIN alone, else beside the executable, the install "
          "layout, the build tree") {
#ifdef PARPLAN_HAVE_CUDA
  // An explicit path is the only candidate: a user pointing at one build must not silently get another.
  CHECK(cuda_plugin_candidates("/opt/x/libparplan_cuda.so", "/usr/bin/parplan") ==
        std::vector<std::string>{"/opt/x/libparplan_cuda.so"});
  const std::vector<std::string> c = cuda_plugin_candidates(nullptr, "/opt/pp/bin/parplan");
  REQUIRE(c.size() == 3);
  CHECK(c[0] == "/opt/pp/bin/libparplan_cuda.so");
  CHECK(c[1].starts_with("/opt/pp/lib"));  // <prefix>/<libdir>/parplan/ (lib, lib64 or lib/<multiarch>)
  CHECK(c[1].ends_with("/parplan/libparplan_cuda.so"));
  CHECK(c[1].find("..") == std::string::npos);  // normalised
  CHECK(c[2].ends_with("runtime/libparplan_cuda.so"));  // this build's own
  CHECK(cuda_plugin_candidates("", "/opt/pp/bin/parplan") == c);  // an empty variable counts as unset
  // Without an executable path (no /proc): the build tree only.
  CHECK(cuda_plugin_candidates(nullptr, "").size() == 1);
  // This test binary is not beside a plugin, but the build tree has one.
  std::string why;
  CHECK(find_cuda_plugin(&why) == c[2]);
  CHECK(why.empty());
#else
  CHECK(cuda_plugin_candidates(nullptr, "/opt/pp/bin/parplan").empty());
  std::string why;
  CHECK(find_cuda_plugin(&why).empty());
  CHECK(why.find("built without the CUDA backend") != std::string::npos);
#endif
}
