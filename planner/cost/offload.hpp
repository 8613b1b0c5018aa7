// Offload: the time of what crosses the GPU <-> host link and of the optimizer step the host CPU runs. (The memory
// side, which states move to the host, lives with the other model states: model_state_bytes(), model_states.hpp.)
//
// ZeRO-Offload (Ren et al. 2021, "ZeRO-Offload: Democratizing Billion-Scale Model Training", USENIX ATC,
// arXiv:2101.06840, Sec. 4): the GPU keeps the 16-bit parameters and runs forward and backward; the gradients go
// down to the host, the CPU runs Adam on the fp32 master weights and moments (its CPU-Adam), and the updated 16-bit
// parameters come back up. With data parallelism each rank moves and updates only the shard it owns (ZeRO-2's
// partition). ZeRO-Infinity (Rajbhandari et al. 2021, arXiv:2104.07857, Sec. 5) also keeps ZeRO-3's parameter shards
// in host memory and copies each to the GPU before its all-gather. Step-time rules used here:
// - serial tail: gradient copy to the host, CPU Adam, parameter copy back, one after the other after the DP
//   reduction (ZeRO-Offload overlaps the CPU step with the next step's compute only with its one-step delayed
//   parameter update, which changes the training algorithm; parplan does not model it);
// - with ZeRO-2/3 each microbatch's gradient shard goes to the host as its reduce-scatter ends, beside the next
//   microbatch's compute, so only the last microbatch's copy is on the tail;
// - a ZeRO-3 gather of offloaded parameters first copies the shard up: the copy is part of the gather, prefetched
//   with it (zero3.hpp), so it is charged inside LayerCost::zero3_gather_s.
//
// Activation offload (OffloadSet::activations) follows TransformerEngine's CPU offload of activations
// (transformer_engine.pytorch.cpu_offload, get_cpu_offload_context() with its AsyncDoubleBufferGroupOffloadHandler,
// the mechanism Megatron-Core's --cpu-offloading / --cpu-offloading-num-layers drives): one offload group per
// transformer layer; when layer l's forward ends its saved tensors are copied to pinned host memory on a separate
// device-to-host stream while layer l+1 computes, and freed on the GPU when that copy ends; in the backward, layer
// l's tensors are copied back on a host-to-device stream while layer l+1's backward runs (one group prefetched,
// num_prefetch_group = 1). So a GPU holds at most two layers of stored activations at once ("double buffer"): the
// layer computing and the one whose copy is in flight. parplan offloads every layer of the stage (TransformerEngine
// takes a count, at most the model's layers - 1: the window of two covers the layer not worth offloading) and, beyond
// TransformerEngine, with pipeline parallelism: every in-flight microbatch's layers are on the host, the window is
// the two layers of the chunk-microbatch computing. Step-time rule: a layer's copy overlaps the next layer's forward
// (down) or backward (up); what outlasts that compute is exposed, per layer and microbatch, once in each pass.
#pragma once
#include "planner/spec/spec.hpp"

namespace parplan {

// Time of `bytes` over one GPU's host link, one direction: latency + bytes / (bandwidth x efficiency).
double host_link_s(const ClusterSpec& c, double bytes);

// The CPU's Adam step over the `owned_params` one GPU updates: the node's GPUs share its CPUs, so the node updates
// min(gpus_per_node, num_gpus) such shards at ClusterSpec::host_adam_params_per_s (ZeRO-Offload CPU-Adam: 10e9
// parameters in 2.57 s, spec.hpp kCpuAdamParamsPerS).
double cpu_adam_s(const Plan& plan, double owned_params);

// The offloaded optimizer step of one GPU that owns `owned_params` parameters (its optimizer shard).
struct OffloadStepTime {
  double grad_bytes = 0;   // gradient shard copied to the host (owned x gradient bytes)
  double param_bytes = 0;  // updated 16-bit shard copied back (0 when the parameters live on the host)
  double grad_d2h_s = 0, cpu_optimizer_s = 0, param_h2d_s = 0;
  double total() const { return grad_d2h_s + cpu_optimizer_s + param_h2d_s; }
};
OffloadStepTime offload_step_time(const Plan& plan, double owned_params);

// Host memory the offloaded states of a node's GPUs take, each holding `host_per_gpu` bytes (a stage's
// StageMemory::host): min(gpus_per_node, num_gpus) GPUs share it. Fits: at most ClusterSpec::host_memory_bytes (no
// check when the profile gives none).
double host_bytes_per_node(const Plan& plan, double host_per_gpu);
bool host_memory_fits(const Plan& plan, double host_per_gpu);

// Activation offload: the layers of stored activations a GPU keeps (the double buffer above).
inline constexpr double kActivationOffloadWindowLayers = 2.0;

// Activation offload of one layer for one microbatch: its copy of `layer_bytes` over the host link (each way) and
// what of the copy outlasts the layer compute it hides behind, forward (the copy down) and backward (the copy up).
struct ActivationOffloadTime {
  double copy_s = 0;
  double exposed_forward_s = 0, exposed_backward_s = 0;
};
ActivationOffloadTime activation_offload_time(const ClusterSpec& c, double layer_bytes, double forward_s,
                                              double backward_s);

// The copy of `shard_params` offloaded 16-bit parameters to the GPU before a ZeRO-3 gather (0 without params offload).
double offload_param_fetch_s(const Plan& plan, double shard_params);

}  // namespace parplan
