// The runtime's seam: abstract devices, buffers, timing events, GEMM, memory-bound ops and collectives (no CUDA types).
//
// A World is a set of ranks (host threads or GPUs). Each rank sees one Device: it allocates buffers with exact
// accounting, launches GEMMs and memory-bound ops, records timing events on two streams (compute and comm),
// and builds Communicators over groups of ranks (ncclCommSplit semantics: every rank of the world calls
// split() with a colour; ranks with the same colour form a group, ordered by key).
// Every failure is thrown as parplan::BackendError naming the call and the library's message.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planner/spec/spec.hpp"

namespace parplan::runtime {

// Bytes of one element of `d` in device memory (the planner's dtype_bytes: fp8 = 1, bf16/fp16 = 2, fp32 = 4).
inline int64_t element_bytes(DType d) { return dtype_bytes(d); }

// A device allocation. `ptr` is host memory (host backend) or device memory (cuda backend); never dereference
// a cuda buffer on the host.
struct Buffer {
  void* ptr = nullptr;
  int64_t bytes = 0;
  explicit operator bool() const { return ptr != nullptr; }
};

enum class Stream : uint8_t { compute, comm };

// An opaque timing event, valid until Device::reset_events().
struct Event {
  int32_t id = -1;
};

// C = A * op(B): A is row-major [m, k]; B is row-major [n, k] when b_transposed (weights as stored by
// nn.Linear: y = x W^T), else [k, n]; C is row-major [m, n]. `batch` independent products with strides
// m*k, (n*k), m*n elements (attention's batched score and context GEMMs). Inputs and output are `dtype`
// except fp8, whose output is bf16. Accumulation is fp32 on both backends. `alpha` scales the product
// (C = alpha A op(B) [+ C]); the executor uses it to keep reused outputs the size of the fill (executor.cpp).
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  DType dtype = DType::bf16;
  bool b_transposed = true;
  bool accumulate = false;  // C += A*op(B) (beta = 1), e.g. weight-gradient accumulation over microbatches
  float alpha = 1.0f;

  int64_t flops() const { return 2 * m * n * k * batch; }
  int64_t a_bytes() const { return m * k * batch * element_bytes(dtype); }
  int64_t b_bytes() const { return n * k * batch * element_bytes(dtype); }
  int64_t c_bytes() const { return m * n * batch * element_bytes(dtype == DType::fp8 ? DType::bf16 : dtype); }
};

enum class CollectiveKind : uint8_t { all_reduce, all_gather, reduce_scatter, all_to_all, send, recv, barrier };
inline constexpr int kNumCollectiveKinds = 7;
std::string_view to_string(CollectiveKind k);

// One collective as one rank saw it. `bytes_sent` is what this rank put on the wire: the host backend counts
// the bytes its ring/direct algorithm really copied out of this rank; the cuda backend records the ring
// algorithm's bytes (the nccl-tests bus-bandwidth definition), since NCCL does not report them.
struct CollectiveRecord {
  CollectiveKind kind = CollectiveKind::barrier;
  int comm_color = 0;     // the split() colour that formed the communicator
  int group_size = 1;
  int64_t payload_bytes = 0;  // the operation's size S as nccl-tests defines it (see docs/runtime.md)
  int64_t bytes_sent = 0;
};

// One send or receive in a grouped point-to-point exchange (Megatron's send_forward_recv_backward pattern);
// all ops of one p2p() call are matched together, so opposite sends cannot deadlock.
struct P2POp {
  bool is_send = true;
  int peer = 0;  // rank within the communicator
  Buffer buf;
  int64_t count = 0;
  DType dtype = DType::bf16;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;  // within the group
  virtual int size() const = 0;
  virtual int color() const = 0;
  // Collectives on the comm stream. Counts are elements. Sums in fp32 accumulation.
  virtual void all_reduce(Buffer send, Buffer recv, int64_t count, DType dtype) = 0;
  virtual void all_gather(Buffer send, Buffer recv, int64_t count_per_rank, DType dtype) = 0;
  virtual void reduce_scatter(Buffer send, Buffer recv, int64_t count_per_rank, DType dtype) = 0;
  virtual void all_to_all(Buffer send, Buffer recv, int64_t count_per_peer, DType dtype) = 0;
  virtual void p2p(std::span<const P2POp> ops) = 0;
  virtual void barrier() = 0;
};

struct MemoryStats {
  int64_t allocated_bytes = 0;       // live bytes handed out through Device::allocate (exact)
  int64_t peak_allocated_bytes = 0;  // high-water mark of allocated_bytes since reset_peak (exact)
  int64_t pool_reserved_peak_bytes = 0;  // backend pool's reserved high-water mark (cuda: cudaMemPool attr)
  int64_t device_total_bytes = 0;    // device memory (cudaMemGetInfo; host: physical memory)
  int64_t device_free_bytes = 0;
};

// What allocate() leaves in a new buffer. `pattern`: the host backend zero-fills; the cuda backend writes the
// deterministic pseudo-random fill (fill_pattern.hpp), because GEMMs on zeros run faster than on real data.
// `none`: contents unspecified (cuda: no fill kernel, as a framework allocator; the host backend still zeroes).
enum class Fill : uint8_t { pattern, none };

struct DeviceInfo {
  std::string name;
  int compute_capability = 0;  // 90 for sm_90; 0 for the host
  int64_t memory_bytes = 0;
  bool supports_fp8 = false;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual int rank() const = 0;        // in the world
  virtual int world_size() const = 0;
  virtual DeviceInfo info() const = 0;

  // Memory. allocate() initialises as `fill` says (above); bytes are counted exactly; free() of an unknown buffer
  // throws.
  virtual Buffer allocate(int64_t bytes, Fill fill = Fill::pattern) = 0;
  virtual void free(Buffer b) = 0;
  virtual MemoryStats memory_stats() const = 0;
  virtual void reset_peak() = 0;
  // Synchronous copies between host memory and a buffer (tests, calibration); bytes must fit the buffer.
  virtual void upload(Buffer dst, const void* src, int64_t bytes) = 0;
  virtual void download(void* dst, Buffer src, int64_t bytes) = 0;

  // Compute on the compute stream.
  virtual void gemm(const GemmShape& s, Buffer a, Buffer b, Buffer c) = 0;
  // A memory-bound op: reads `bytes` from src and writes `bytes` to dst (norms, softmax, activations, optimizer).
  virtual void memory_op(Buffer src, Buffer dst, int64_t bytes) = 0;

  // Timing: record an event on a stream; make a stream wait for an event; seconds between two events
  // (valid after synchronize()).
  virtual Event record(Stream s) = 0;
  virtual void wait(Stream s, Event e) = 0;
  virtual double elapsed_s(Event from, Event to) = 0;
  virtual void synchronize() = 0;
  virtual void reset_events() = 0;

  // Collective over the whole world: ranks passing the same colour form one communicator, ordered by key.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // Every collective this rank took part in since the last clear, in order.
  virtual const std::vector<CollectiveRecord>& collective_log() const = 0;
  virtual void clear_collective_log() = 0;
};

// A set of ranks. run() calls fn(device) once per local rank, each on its own thread, and rethrows the first
// failure after the others were aborted (their pending collectives fail instead of hanging).
class World {
 public:
  virtual ~World() = default;
  virtual int size() const = 0;             // ranks in the world (all processes)
  virtual int local_ranks() const = 0;      // ranks driven by this process
  virtual void run(const std::function<void(Device&)>& fn) = 0;
};

// Where a GPU can be used. available=false carries the reason (no driver, no device, built without CUDA).
struct CudaAvailability {
  bool available = false;
  int device_count = 0;
  std::string reason;
};
CudaAvailability detect_cuda();

// The CUDA backend is a plugin, libparplan_cuda.so, that detect_cuda() / make_cuda_world() load on first use. Where
// it is looked for, in order: $PARPLAN_CUDA_PLUGIN when set (then nowhere else), beside the executable, the install
// layout (<prefix>/bin/parplan -> <prefix>/<libdir>/parplan/), the build tree it was built in. Empty when parplan
// was built without the CUDA backend. `exe` is the running executable (/proc/self/exe).
std::vector<std::string> cuda_plugin_candidates(const char* env_value, const std::string& exe);
// The first candidate that exists (what would be loaded), or "" with the reason in *why (one line, names the paths).
std::string find_cuda_plugin(std::string* why);

// The host backend: `ranks` CPU threads in this process with shared-memory collectives.
std::unique_ptr<World> make_host_world(int ranks);

// The cuda backend. Threads mode: one thread per GPU on this node (`ranks` <= device count). Under MPI
// (when built with MPI and launched by mpirun/srun with more than one process) each process drives one GPU and
// the world spans all processes. Throws BackendError when no GPU is usable or when built without CUDA.
std::unique_ptr<World> make_cuda_world(int ranks);

}  // namespace parplan::runtime
