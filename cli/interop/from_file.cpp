// --from FILE: a framework config -> plan flags -> build_plan (see from_file.hpp).
#include "cli/interop/from_file.hpp"
#include <charconv>

#include <fmt/core.h>
#include <map>

#include "cli/io.hpp"
#include "cli/text.hpp"
#include "planner/spec/config.hpp"
#include "planner/spec/error.hpp"

namespace parplan::cli {
namespace {

// The command line's values of the given plan flags, as flag -> value ("" for a switch); repeatable ones joined.
std::map<std::string, std::vector<std::string>> given_flags(const ModelOptions& mo, const MeshOptions& me) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto* set : {&mo.options, &me.options}) {
    for (const CLI::Option* op : *set) {
      if (op->count() == 0) continue;
      out[op->get_name()] = op->get_expected_max() == 0 ? std::vector<std::string>{""} : op->results();
    }
  }
  return out;
}

// The flag a build_plan message starts with ("--tp: ..."), or "".
std::string leading_flag(const std::string& msg) {
  if (!msg.starts_with("--")) return "";
  const size_t end = msg.find_first_of(":/ ");
  return msg.substr(0, end);
}

// " (from <the file's option>)" for the plan flag `flag` the file gave; "" for one the command line gave, or none.
std::string file_origin(const std::map<std::string, Setting>& flags, const std::string& flag) {
  const auto it = flags.find(flag);
  if (it == flags.end() || it->second.origin == "the command line") return "";
  return fmt::format(" (from {})", it->second.origin);
}

// torchtitan's every N-th block (Imported::every_nth_layer; the mapping is explained at titan_layer_ac) once the
// plan's chunks are known: recompute_layers every_nth_block_layers() (floor(the first chunk's layers / N)), as
// validate's torchtitan rows take it. Not where the command line's --recompute or --recompute-layers replaces the file's. A chunk of fewer than N
// layers has no block to recompute, which the block method (K >= 1; 0 is every layer) cannot say: an InputError.
void resolve_every_nth_layer(FromResult& r, const std::map<std::string, Setting>& flags, const std::string& where) {
  const auto& e = r.imported.every_nth_layer;
  if (!e) return;
  const auto rc = flags.find("--recompute");
  if (rc == flags.end() || rc->second.origin != e->origin || flags.count("--recompute-layers")) return;
  Plan& plan = r.plan;
  const int64_t layers = chunk_layers(plan, 0, 0), k = every_nth_block_layers(plan, e->n);
  if (k < 1) {
    throw InputError(fmt::format("{}: {}: one block in {} with {}-layer chunks recomputes no block of a chunk, which "
                                 "parplan's full recompute of the first K layers of each chunk cannot express (give "
                                 "--recompute none, or a smaller N)",
                                 where, e->origin, e->n, layers));
  }
  plan.parallel.recompute_layers = k;
  if (validate(plan).has(Reject::recompute_layers_invalid)) {
    throw InputError(fmt::format("{}: {}: {}", where, e->origin, describe(Reject::recompute_layers_invalid, plan)));
  }
  r.imported.flags["--recompute-layers"] =
      Setting{std::to_string(k), fmt::format("{} (one block in {}: {} of each chunk's {} layers)", e->origin, e->n, k, layers), ""};
}

// torchtitan with pp > 1 runs global / (local x dp) accumulation steps, each a whole pipeline schedule of local / mb
// microbatches with its own fill and drain (Imported::one_schedule). parplan prices one schedule of all of a step's
// microbatches, so a plan with more than one schedule a step is an InputError naming the global batch.
void refuse_repeated_flushes(const FromResult& r, const std::map<std::string, Setting>& flags, const std::string& where) {
  const auto& s = r.imported.one_schedule;
  const ParallelConfig& pc = r.plan.parallel;
  if (!s || pc.pp < 2 || pc.num_microbatches <= s->microbatches) return;
  const auto g = flags.find("--global-batch");
  const std::string from = g != flags.end() ? g->second.origin : "the global batch";
  const int64_t local = s->microbatches * pc.micro_batch;
  throw InputError(fmt::format(
      "{}: {}: global batch {} is {} accumulation steps of local batch {} x dp {}, each its own torchtitan pipeline "
      "schedule of {} microbatches with its own bubble, which parplan does not model (it would price one schedule of "
      "{}): make the global batch {} (local x dp), or the local batch ({}) {}",
      where, from, r.plan.training.global_batch, pc.num_microbatches / s->microbatches, local, pc.dp, s->microbatches,
      pc.num_microbatches, local * pc.dp, s->local_origin, r.plan.training.global_batch / pc.dp));
}

// The file's window options (Imported::window_options) with the command line's model `model` ("--model NAME"): the
// model's own window prices the attention, so they are listed as ignored; a model without a window is an InputError
// (the file's window would be priced as full attention).
void resolve_window_options(FromResult& r, const std::string& model, const std::string& where) {
  Imported& im = r.imported;
  if (im.window_options.empty()) return;
  const ModelSpec& m = r.plan.model;
  if (m.sliding_window <= 0) {
    throw InputError(fmt::format("{}: {} states a sliding window, and {} has none: give --model a profile with "
                                 "sliding_window and sliding_window_pattern",
                                 where, im.window_options.front(), model));
  }
  for (const std::string& o : im.window_options) {
    im.ignored.push_back(fmt::format("{}: the window is {}'s (sliding_window {}, sliding_window_pattern {}; not "
                                     "compared with the file's)",
                                     o, model, m.sliding_window, m.sliding_window_pattern));
  }
}

// torchtitan's data_parallel_shard_degree -1 with replicas and cp 1 (Imported::titan_shard_rest): where the GPU count
// over tp x pp x replicas leaves one shard rank, torchtitan runs DDP (parallel_dims.py: no dp_shard, no cp, so no
// FSDP), so the imported --dp-replicate, --zero 3 and --fsdp2 are dropped, noted. Left alone where the command line
// sets --dp, --dp-replicate or --zero.
void resolve_titan_shard_rest(Imported& im, std::map<std::string, Setting>& flags) {
  if (im.titan_shard_rest.empty() || flags.count("--dp") || !flags.count("--gpus")) return;
  for (const char* f : {"--dp-replicate", "--zero"}) {
    if (!flags.count(f) || flags.at(f).origin == "the command line") return;
  }
  auto num = [&](const char* f) -> int64_t {
    if (!flags.count(f)) return 1;
    int64_t v = 0;
    const std::string& t = flags.at(f).value;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return ec == std::errc() && end == t.data() + t.size() && v > 0 ? v : 0;
  };
  const int64_t per = num("--tp") * num("--pp") * num("--cp") * num("--dp-replicate");
  if (per < 1 || num("--gpus") != per) return;
  flags.erase("--dp-replicate");
  flags.erase("--zero");
  flags.erase("--fsdp2");
  im.assumed.push_back(fmt::format("DDP: {} leaves one shard rank on {} GPUs, and with cp 1 torchtitan runs DDP over "
                                   "the replicas (no FSDP, no HSDP)",
                                   im.titan_shard_rest, num("--gpus")));
}

// torchtitan's float8 tensorwise TP all-gathers in fp8 (Imported::titan_float8_tp): assumed where the plan, with the
// command line's values in, is fp8 with the tensorwise recipe (the plan's default) and SP over tp > 1. A command line
// that makes it another recipe or precision, or tp 1, leaves them 16-bit; its own --fp8-tp-gather stays.
void resolve_titan_float8_tp(Imported& im, std::map<std::string, Setting>& flags) {
  if (!im.titan_float8_tp || flags.count("--fp8-tp-gather")) return;
  const auto value = [&](const char* flag) { return flags.count(flag) ? flags.at(flag).value : std::string(); };
  const std::string recipe = value("--fp8-recipe"), tp = value("--tp");
  if (value("--precision") != "fp8" || !(recipe.empty() || recipe == "tensorwise")) return;
  if (tp.empty() || tp == "1" || !flags.count("--sequence-parallel")) return;
  const std::string why = "float8 tensorwise TP: the column-parallel inputs and the row-parallel output gradients are "
                          "all-gathered in fp8 (torchtitan enable_float8_tensorwise_tp)";
  flags["--fp8-tp-gather"] = Setting{"", "assumed: " + why, ""};
  im.assumed.push_back("--fp8-tp-gather: " + why);
}

}  // namespace

void add_from_options(CLI::App& app, FromOptions& o, bool with_target, bool with_gpu) {
  app.add_option("--from", o.file,
                 "Read the plan from a training framework's config: a Megatron-LM launch script or YAML args, a NeMo "
                 "YAML, a torchtitan TOML, a DeepSpeed JSON or a nanotron YAML (docs/interop.md)");
  app.add_option("--format", o.format, "The --from file's format: auto (default), megatron, nemo, torchtitan, deepspeed, nanotron");
  if (with_target) add_target_options(app, o.model, o.mesh, "--from", with_gpu);
}

void add_target_options(CLI::App& app, ModelOptions& mo, MeshOptions& me, std::string_view source, bool with_gpu) {
  const size_t before = app.get_options().size();
  app.add_option("--gpus", mo.gpus, fmt::format("With {}: the GPU count, when the file does not give it", source))
      ->check(CLI::Range(int64_t{1}, kMaxMeshGpus));
  app.add_option("--model", mo.model, fmt::format("With {}: the model (profile name, JSON file or Hugging Face config.json) instead of the file's shape", source));
  app.add_option("--params", mo.params,
                 fmt::format("With {}: a parameter count (175e9, 175B) whose GPT-style shape replaces the file's", source));
  app.add_option("--cluster", mo.cluster, fmt::format("With {}: the cluster profile (default dgx-h100)", source));
  if (with_gpu) {
    app.add_option("--gpu", mo.gpu, fmt::format("With {}: the GPU profile (name or JSON file) instead of the cluster's GPU", source));
  }
  app.add_option("--seq", mo.seq, fmt::format("With {}: the sequence length in tokens, when the file does not give it", source))
      ->check(CLI::Range(int64_t{1}, int64_t{100'000'000}));
  const auto all = app.get_options();
  mo.options.insert(mo.options.end(), all.begin() + static_cast<std::ptrdiff_t>(before), all.end());
  add_knob_options(app, mo);  // with --from: values replacing the file's (--precision fp8)
  add_mesh_options(app, me);  // with --from: values replacing the file's (--tp 8)
}

void refuse_without_from(const FromOptions& from) {
  if (!from.file.empty()) return;
  if (from.format != "auto") throw InputError("--format: needs --from FILE");
  for (const auto* set : {&from.model.options, &from.mesh.options}) {
    for (const CLI::Option* op : *set) {
      if (op->count() > 0) throw InputError(fmt::format("{}: needs --from FILE (it replaces the file's value)", op->get_name()));
    }
  }
}

FromResult plan_from_framework(const std::string& file, const std::string& format, const ModelOptions& mo,
                               const MeshOptions& me, const ProfileSet& profiles, std::string_view file_flag) {
  const std::optional<Framework> fw = parse_framework(format, "--format");
  FromResult r;
  r.imported = import_framework(read_file(file, file_flag), file, fw);
  Imported& im = r.imported;
  const std::string where = printable(file);
  const auto given = given_flags(mo, me);
  const bool model_given = given.count("--model") || given.count("--params");
  if (!im.window_options.empty() && !model_given) {
    throw InputError(fmt::format("{}: {}: sliding-window attention is not read from the file; give --model "
                                 "a profile with sliding_window and sliding_window_pattern (it replaces the file's "
                                 "model)",
                                 where, im.window_options.front()));
  }
  resolve_pipeline_split(im, given.count("--pp") ? given.at("--pp").front() : "", given.count("--vpp") != 0, model_given,
                         where);
  if (model_given && (im.model || !im.model_name.empty())) {
    const std::string flag = given.count("--model") ? "--model" : "--params";
    r.overridden.push_back(fmt::format("{} {} (command line) replaces {} from {}", flag, given.at(flag).front(),
                                       im.model ? fmt::format("the file's model shape ({} layers, hidden {})", im.model->layers,
                                                                  im.model->hidden)
                                                     : im.model_name,
                                       im.model_origin));
    r.model_replaced = true;
  }
  std::map<std::string, Setting> flags = im.flags;
  for (const auto& [flag, values] : given) {
    const auto it = flags.find(flag);
    const std::string v = values.empty() ? "" : values.front();
    if (it != flags.end() && !it->second.origin.starts_with("assumed") && it->second.value != v) {
      r.overridden.push_back(fmt::format("{} {} (command line) replaces {}{}", flag, v,
                                         it->second.placeholder.empty() ? it->second.value : it->second.placeholder,
                                         " from " + it->second.origin));
    } else if (it == flags.end() || it->second.origin.starts_with("assumed")) {
      r.added.push_back(v.empty() ? flag : flag + " " + v);
    }
    flags[flag] = Setting{v, "the command line", ""};
  }
  resolve_titan_float8_tp(im, flags);
  for (const auto& [flag, s] : flags) {
    if (in_branch(s.placeholder)) {
      throw InputError(fmt::format("{}: {} is {}: flatten the script or give {} N", where, s.origin,
                                   excerpt(s.placeholder, 2 * kExcerptBytes), flag));
    }
    if (!s.placeholder.empty()) {
      throw InputError(fmt::format("{}: {} is {}, which the file does not set: set it in the file or give {} N", where,
                                   s.origin, excerpt(s.placeholder), flag));
    }
  }
  resolve_titan_shard_rest(im, flags);
  if (!flags.count("--gpus") && !flags.count("--dp")) {
    throw InputError(fmt::format("{}: the GPU count is not in the file ({}): give --gpus N", where, im.gpus_hint));
  }
  if (!model_given && !im.model && im.model_name.empty()) {
    throw InputError(fmt::format("{}: {} gives no model shape: give --model NAME", where, framework_document(im.format)));
  }
  std::vector<std::string> words;
  for (const auto& [flag, s] : flags) {
    if (flag == "--profile" && given.count(flag)) {
      for (const std::string& p : given.at(flag)) words.push_back(flag + "=" + p);
    } else {
      words.push_back(s.value.empty() ? flag : flag + "=" + s.value);
    }
  }
  if (!model_given && !im.model) words.push_back("--model=" + im.model_name);
  CLI::App app{"parplan --from"};
  app.set_help_flag();
  ModelOptions m;
  MeshOptions x;
  add_model_options(app, m);
  add_mesh_options(app, x);
  std::reverse(words.begin(), words.end());
  try {
    app.parse(words);
  } catch (const CLI::Error& e) {  // a value out of a flag's range: named with the file's option that gave it
    const std::string msg = excerpt(e.what(), 2 * kExcerptBytes);
    throw InputError(fmt::format("{}: {}{}", where, msg, file_origin(flags, leading_flag(msg))));
  }
  if (!model_given && im.model) {
    m.model_spec = im.model;
    if (im.model->seq_len == 0 && !m.seq) {
      throw InputError(fmt::format("{}: the sequence length is not in the file: give it there (or --seq N)", where));
    }
  }
  try {
    r.plan = build_plan(m, x, profiles);
  } catch (const InputError& e) {
    const std::string msg = e.what();
    const std::string flag = leading_flag(msg);
    std::string from = file_origin(flags, flag);
    if (flag == "--model" && !model_given && !im.model) from = fmt::format(" (from {}; give --model NAME)", im.model_origin);
    throw InputError(fmt::format("{}: {}{}", where, msg, from));
  }
  resolve_every_nth_layer(r, flags, where);
  refuse_repeated_flushes(r, flags, where);
  if (model_given) {
    const std::string flag = given.count("--model") ? "--model" : "--params";
    resolve_window_options(r, flag + " " + given.at(flag).front(), where);
  }
  return r;
}

void print_from_summary(std::FILE* to, std::string_view command, const std::string& file, const FromResult& r) {
  fmt::print(to, "parplan {}: {} read as {}: {} value{} assumed, {} option{} ignored{} (parplan import lists them)\n",
             command, printable(file), framework_name(r.imported.format), r.imported.assumed.size(),
             r.imported.assumed.size() == 1 ? "" : "s", r.imported.ignored.size(),
             r.imported.ignored.size() == 1 ? "" : "s",
             r.overridden.empty() ? "" : fmt::format(", {} replaced by the command line", r.overridden.size()));
}

Plan load_plan_source(std::string_view command, const std::string& plan_file, const FromOptions& from,
                      const ModelOptions& mo, const MeshOptions& me, const ProfileSet& profiles, std::string* note,
                      std::string* batch_note) {
  if (from.file.empty()) {
    refuse_without_from(from);
    return plan_file.empty() ? build_plan(mo, me, profiles, note, batch_note) : load_plan_file(plan_file, profiles);
  }
  if (!plan_file.empty()) throw InputError("--from and --plan: give one");
  FromResult r = plan_from_framework(from.file, from.format, mo, me, profiles);
  print_from_summary(stderr, command, from.file, r);
  return std::move(r.plan);
}

}  // namespace parplan::cli
