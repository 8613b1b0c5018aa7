// Entry point of the GPU tests: exits 77 (skip) with the reason when no GPU is usable, else runs doctest.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "runtime/backend.hpp"

int main(int argc, char** argv) {
  const parplan::runtime::CudaAvailability a = parplan::runtime::detect_cuda();
  if (!a.available) {
    std::fprintf(stderr, "skipping GPU tests: %s\n", a.reason.c_str());
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
