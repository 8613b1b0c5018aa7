// ZeRO-3 parameter gathering at its two granularities: what each gather unit holds, and the time a pass over one
// layer takes when each unit's all-gather is prefetched one unit ahead on the data-parallel link.
//
// PyTorch FSDP (FULL_SHARD with each transformer block wrapped, as llm-foundry configures it) gathers
// a whole layer and prefetches the next one (Zhao et al. 2023, "PyTorch FSDP": backward and forward
// prefetching of the next FlatParameter). DeepSpeed ZeRO-3 fetches per submodule from its module hooks and
// prefetches the next submodule of the traced order (Rajbhandari et al. 2021, "ZeRO-Infinity":
// "overlap-centric design", and DeepSpeed's PartitionedParameterCoordinator.fetch_sub_module): in a transformer
// layer those units are its four linears. At the finer unit the link idles whenever a linear computes for longer
// than the next one takes to gather, and the compute stalls whenever the next gather (queued behind earlier
// gradient reduce-scatters on the same link) outlasts it: with compute equal to communication, a GeLU layer's pass
// (linears of 3 : 1 : 4 : 4 parameters) takes 25% longer than max(compute, communication), where whole-layer units of
// equal layers lose nothing.
#pragma once
#include <array>
#include <span>

#include "planner/spec/spec.hpp"

namespace parplan {

// The linears of one layer in forward order (QKV, attention output, MLP up, MLP down) and each one's share of the
// layer's parameters on one GPU (norms and biases spread in proportion; for MoE the up / down shares are the local
// experts' and the router's). Shares add up to 1.
inline constexpr int kZero3Linears = 4;
std::array<double, kZero3Linears> zero3_linear_shares(const Plan& plan);

// Whether a recomputed forward gathers its layer's parameters again (ZeRO-3, full or partial recompute): DeepSpeed's
// per-submodule fetch (the linear unit) runs from module hooks the recomputed forward fires again, and the backward
// fetches once more; PyTorch FSDP (the layer unit) gathers the block in its pre-backward hook and the checkpointed
// forward it wraps reruns inside that backward with the block gathered (torch.utils.checkpoint reruns the wrapped
// module, whose FSDP hooks are on the wrapper: torchtitan applies checkpoint_wrapper, then fully_shard), so it
// gathers once in backward, recompute or not. The data-parallel link's work and the simulator's gathers follow it.
bool recompute_regathers(const ParallelConfig& pc);

// Gathered 16-bit parameters held at once, in parameters of the layer's shard: the unit in use plus the prefetched
// one. layer: 2 layers; linear: the largest pair of consecutive linears (MLP up + down, 16 h^2 bytes in 16 bits for a
// 4h GeLU MLP).
double zero3_gathered_params(const Plan& plan, double layer_params);

// Parameters whose unsharded gradient exists at once: the unit being back-propagated writes its whole gradient before
// its reduce-scatter leaves (FSDP's post-backward hook reduce-scatters the unit's unsharded FlatParameter gradient,
// Zhao et al. 2023; DeepSpeed reduces the submodule's gradients it just produced). layer: one layer; linear:
// the largest linear (ZeRO-Infinity's model-state working memory counts the largest operator's parameters and
// gradients, Rajbhandari et al. 2021).
double zero3_unsharded_grad_params(const Plan& plan, double layer_params);

// Bytes of one unit's unsharded gradient in the reduction's dtype, with ZeRO-2 or ZeRO-3 (0 below ZeRO-2). ZeRO-2
// keeps only its 1/(dp cp) shard of the accumulated gradient, yet each unit's backward writes the unit's whole
// gradient before the reduce-scatter that shards it (FSDP SHARD_GRAD_OP reduce-scatters each unit's FlatParameter
// gradient in its post-backward hook, Zhao et al. 2023; DeepSpeed ZeRO-2 reduces what its backward hooks produced
// from a bucket, Rajbhandari et al. 2020 Sec. 5.2), so it holds one unit's unsharded gradient beside the shard, as
// ZeRO-3 does: StageMemory::grads counts it for ZeRO-2, StageMemory::zero3_buffers for ZeRO-3.
double zero_unsharded_grad_bytes(const Plan& plan, double layer_params);

// StageMemory::zero3_buffers: the gathered 16-bit parameters plus the unsharded gradient in the reduction's dtype.
double zero3_buffer_bytes(const Plan& plan, double layer_params);

// PyTorch FSDP (the layer unit) keeps its root module's parameters, those outside the wrapped blocks (the embedding,
// final norm and output layer of the stage: `root_params`), gathered from their forward until their post-backward,
// so they are gathered at the step's peak, the start of the backward: FSDP1's _post_forward_reshard frees no root
// FlatParameter (free_unsharded_flat_param = not state._is_root and ...), and FSDP2's root FSDPState sets its param
// group's post_forward_mesh_info to None in _lazy_init ("the parameters would be freed and all-gathered
// immediately"). 0 for the linear unit (DeepSpeed releases each submodule after use) and below ZeRO-3. Llama 3 8B
// (untied, vocab 128256): 2 x 128256 x 4096 + 4096 parameters, 2.10 GB in bf16. Part of StageMemory::zero3_buffers.
double zero3_root_gathered_bytes(const Plan& plan, double root_params);

// PyTorch FSDP2's copies (ParallelConfig::fsdp2), in bytes per unsharded parameter, as fully_shard runs them
// (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, PyTorch 2.4 to 2.11; read from its code, not
// re-checked here): an all-gather's copy-in casts the fp32 shard to the gathered dtype into the all-gather input
// (read 4, write g bytes per shard element: (4 + g) / N per parameter) and its copy-out splits the gathered buffer
// into each parameter's unsharded tensor (read g, write g); a reduce-scatter's copy-in concatenates the unsharded
// 16-bit gradients into its input in the reduction dtype R (chunk_cat: read 2, write R), and the reduced shard
// becomes the sharded gradient as it is. N: the shard group (dp cp). g: gathered_param_bytes (2; 1 with the fp8
// parameter gather). With N = 1, fp32 reduction, Llama 3 8B's shapes with 4 layers (1.92e9 parameters) at 8192
// tokens: 10 + 10 + 6 bytes per layer parameter, 10 + 6 per root parameter (gathered once, zero3_root_gathered_bytes),
// 13.5 ms at the H100 profile's HBM rate, 10.3 ms at the H200's; measured (bench/gpu/step.py, eager, one rank): the
// step's forward and backward 23.1 ms (H100) and 17.4 ms (H200) longer than with unsharded bf16 parameters, of which
// 5.3 / 4.0 ms is the one-rank reduce-scatter's own copy of its fp32 output: the model is 0.76x the rest, as FSDP2's
// copy kernels run below the HBM rate of one large copy (tests/planner/cost/step_measurements_test.cpp). With HSDP
// N is the shard group, dp / dp_replicate x cp (ParallelConfig::shard_group).
struct Fsdp2CopyBytes {
  double gather = 0, reduce = 0;  // bytes each all-gather, each reduce-scatter copies
};
// The copies of `params` unsharded parameters (default one: the bytes per parameter), `expert_params` of them a MoE
// layer's experts, whose shard group is the expert-data-parallel group (expert_dp_size), not dp cp. 0 unless the
// plan is FSDP2 with ZeRO-3. The cost model prices them at the HBM rate; the runtime lowers the same bytes.
Fsdp2CopyBytes fsdp2_copy_bytes(const Plan& plan, double params = 1.0, double expert_params = 0.0);

// One unit's step in a pass: its compute (from its start to the next unit's start), the all-gather of its
// parameters, and (backward) the reduce-scatter of its gradients, queued on the same link when its compute ends.
struct Zero3Step {
  double compute_s = 0, gather_s = 0, reduce_s = 0;
};

// Steady-state time per layer of `per_layer` repeated layer after layer: unit j's gather is issued when unit j-1
// starts computing (one ahead), gathers and reduce-scatters share one FIFO link, and unit j computes once its
// gather is done and unit j-1 has finished. Without reduce-scatters this is exactly sum_j max(compute_j,
// gather_{j+1}) (the gather issued at a unit's start is never queued); with them the link's backlog is followed
// until the rate per layer settles.
double zero3_prefetch_layer_s(std::span<const Zero3Step> per_layer);

}  // namespace parplan
