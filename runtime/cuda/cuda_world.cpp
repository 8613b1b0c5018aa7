// The cuda backend's World: one thread per GPU in this process, or one GPU per process under MPI (rank 0 makes
// the NCCL unique id and MPI_Bcast's it). A failure on one rank aborts the others' communicators.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <fmt/core.h>
#include <mutex>
#include <thread>

#include "planner/spec/error.hpp"
#include "runtime/cuda/check.hpp"
#include "runtime/cuda/cuda_device.hpp"

#ifdef PARPLAN_HAVE_MPI
#include <mpi.h>
#endif

namespace parplan::runtime {
namespace cuda {
namespace {

// Processes in the launch, from the launcher's environment (Open MPI, MPICH/PMI, Slurm); 1 when not launched.
int launched_processes() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"}) {
    if (const char* v = std::getenv(var)) {
      int n = std::atoi(v);
      if (n > 0) return n;
    }
  }
  return 1;
}

class CudaWorld final : public World {
 public:
  explicit CudaWorld(int ranks) {
    CudaAvailability a = detect();
    if (!a.available) throw BackendError(a.reason);
    if (launched_processes() > 1) {
#ifdef PARPLAN_HAVE_MPI
      init_mpi(a.device_count);
#else
      throw BackendError(fmt::format("launched as {} processes, but parplan was built without MPI: rebuild with MPI "
                                     "(libopenmpi-dev) or run one process with a thread per GPU",
                                     launched_processes()));
#endif
    } else {
      if (ranks < 1 || ranks > a.device_count) {
        throw BackendError(fmt::format("cuda backend: {} ranks requested, this node has {} GPU(s); launch with mpirun for more",
                                       ranks, a.device_count));
      }
      size_ = ranks;
      for (int r = 0; r < ranks; ++r) ordinals_.push_back(r);
      first_rank_ = 0;
      PARPLAN_NCCL_CHECK(nullptr, ncclGetUniqueId(&id_));
    }
    devices_.resize(ordinals_.size());
  }
  ~CudaWorld() override {
    // Communicator teardown may synchronise peers, so every rank's device is destroyed on its own thread.
    std::vector<std::thread> threads;
    for (auto& d : devices_) threads.emplace_back([&d] { d.reset(); });
    for (auto& t : threads) t.join();
#ifdef PARPLAN_HAVE_MPI
    if (mpi_started_) MPI_Finalize();
#endif
  }
  int size() const override { return size_; }
  int local_ranks() const override { return static_cast<int>(ordinals_.size()); }

  void run(const std::function<void(Device&)>& fn) override {
    abort_ = false;
    std::mutex mu;
    std::exception_ptr first;
    std::vector<std::thread> threads;
    for (size_t i = 0; i < ordinals_.size(); ++i) {
      threads.emplace_back([&, i] {
        try {
          if (!devices_[i]) {
            devices_[i] = std::make_unique<CudaDevice>(ordinals_[i], first_rank_ + static_cast<int>(i), size_, id_, &abort_);
          } else {
            devices_[i]->bind();
          }
          fn(*devices_[i]);
          devices_[i]->synchronize();
        } catch (...) {
          {
            std::lock_guard lock(mu);
            if (!first) first = std::current_exception();
          }
          abort_ = true;
          if (devices_[i]) devices_[i]->abort_communicators();
        }
      });
    }
    for (auto& t : threads) t.join();
    if (first) std::rethrow_exception(first);
  }

 private:
#ifdef PARPLAN_HAVE_MPI
  void init_mpi(int device_count) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        throw BackendError("MPI_Init_thread failed");
      }
      mpi_started_ = true;
    }
    int rank = 0, size = 1, local = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    if (local >= device_count) {
      throw BackendError(fmt::format("MPI rank {} is local rank {} on its node, which has only {} GPU(s)", rank, local, device_count));
    }
    if (rank == 0) PARPLAN_NCCL_CHECK(nullptr, ncclGetUniqueId(&id_));
    if (MPI_Bcast(&id_, sizeof id_, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
      throw BackendError("MPI_Bcast of the NCCL unique id failed");
    }
    size_ = size;
    first_rank_ = rank;
    ordinals_ = {local};
  }
  bool mpi_started_ = false;
#endif

  int size_ = 0, first_rank_ = 0;
  std::vector<int> ordinals_;
  ncclUniqueId id_{};
  std::atomic<bool> abort_{false};
  std::vector<std::unique_ptr<CudaDevice>> devices_;
};

}  // namespace

std::unique_ptr<World> make_world(int ranks) { return std::make_unique<CudaWorld>(ranks); }

}  // namespace cuda
}  // namespace parplan::runtime

// The plugin's C entry points, looked up by runtime/backend.cpp with dlsym (same compiler and C++ library: the
// plugin is built with parplan). `error` receives a BackendError's message; nullptr then comes back.
extern "C" {
__attribute__((visibility("default"))) void parplan_cuda_detect(parplan::runtime::CudaAvailability* out) {
  *out = parplan::runtime::cuda::detect();
}
__attribute__((visibility("default"))) parplan::runtime::World* parplan_cuda_make_world(int ranks, std::string* error) {
  try {
    return parplan::runtime::cuda::make_world(ranks).release();
  } catch (const std::exception& e) {
    *error = e.what();
    return nullptr;
  }
}
}
