// JSON (de)serialisers of the specs: model, GPU and cluster profiles, parallel config and training settings.
// Units are converted here, once: JSON carries GiB/MiB, GB/s, TFLOP/s and microseconds; the specs carry
// bytes, bytes/s, FLOP/s and seconds. Every reader is strict (unknown keys and out-of-range values are errors).
#pragma once
#include <nlohmann/json.hpp>

#include "planner/spec/json_reader.hpp"
#include "planner/spec/spec.hpp"

namespace parplan {

ModelSpec model_from_json(JsonReader& r);
GpuSpec gpu_from_json(JsonReader& r);
ClusterSpec cluster_from_json(JsonReader& r);
ParallelConfig parallel_from_json(JsonReader& r);
TrainingSpec training_from_json(JsonReader& r);

nlohmann::json to_json(const ModelSpec& m);
nlohmann::json to_json(const GpuSpec& g);
nlohmann::json to_json(const ClusterSpec& c);
nlohmann::json to_json(const ParallelConfig& p);
nlohmann::json to_json(const TrainingSpec& t);

// Cross-field checks of a model (heads divide hidden, kv_heads divide heads, top_k <= experts...); an error names
// `where` and the key under `path`, the model object's JSON pointer ("" for a model file, "/model" in a Plan).
void check_model(const ModelSpec& m, const std::string& where, const std::string& path = "");

}  // namespace parplan
