// The catalog of the run paths' input checks. Each entry breaks one rule of a scenario that is
// otherwise valid (a collective run, a data-parallel run with allreduce, broadcast or sharded
// sync, a 3D-parallel run): `ccsim validate` must report it at its JSON Pointer with what was
// expected and what was found (exit 2), and `ccsim run` must reject the same file with the same
// report and write nothing. The bases themselves pass both. A file with many independent defects
// gets every one of them in one report.
//
// The entries follow the checks in order: the declared fields (tools/app/scenario.hpp, with the
// specs sim and traces declare), then tools/app/scenario_checks.cpp section by section, with the
// lower layers' problem lists it reports (topology builders, straggler and tenant specs, compressor
// parameters, the compressed-collective lowering, the 3D-parallel job).

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "tests/tools/cli_run.hpp"
#include "tests/tools/temp_dir.hpp"
#include "traces/npy.hpp"

namespace ccsim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace ccsim::testing;

const fs::path kSourceDir = CCSIM_SOURCE_DIR;

// The valid scenarios the entries start from ($SRC: the source tree).
json base(const std::string& kind) {
  const json fp32 = json::array({{{"scheme", "fp32"}}});
  if (kind == "collective")
    return {{"name", "v"}, {"cluster", {{"nodes", 4}}}, {"gradients", {{"size", "64KB"}}}, {"compression", fp32}};
  if (kind == "parallel")
    return {{"name", "v"},
            {"cluster", {{"nodes", 4}, {"gpus_per_node", 2}}},
            {"parallelism", {{"tp", 2}, {"pp", 2}}},
            {"workload", {{"trace", "$SRC/traces/models/gpt2-345m.json"}, {"rounds", 2}, {"micro_batches", 2}}},
            {"compression", json::array({{{"scheme", "fp16"}}})}};
  json training = {{"name", "v"},
                   {"cluster", {{"nodes", 4}}},
                   {"workload", {{"trace", "$SRC/traces/models/resnet50-aqgb-4blocks.json"}, {"rounds", 2}}},
                   {"compression", fp32}};
  if (kind == "broadcast") training.merge_patch({{"sync", {{"mode", "broadcast"}}}});
  if (kind == "sharded")
    training.merge_patch({{"collective", {{"operation", "reduce_scatter"}}}, {"sync", {{"mode", "sharded"}}}});
  return training;
}

struct Check {
  const char* name;
  const char* base;     // collective, training, broadcast, sharded, parallel
  const char* patch;    // a JSON merge patch ($DIR: the helper files, $SRC: the source tree)
  const char* pointer;  // where the report must point
  const char* message;  // what it must say there
};

const Check kChecks[] = {
    // ---- declared fields: types, ranges, choices, keys, files, patterns, compressor parameters
    {"UnknownKey", "collective", R"({"clustr": {}})", "/clustr", "unknown key 'clustr' (did you mean 'cluster'?)"},
    {"WrongType", "collective", R"({"cluster": {"nodes": "four"}})", "/cluster/nodes",
     "expected an integer in [1, 1048576], got the string \"four\""},
    {"OutOfRange", "collective", R"({"cluster": {"gpus_per_node": 0}})", "/cluster/gpus_per_node",
     "expected an integer in [1, 1024], got the number 0"},
    {"BadQuantity", "collective", R"({"cluster": {"nic_bandwidth": "fast"}})", "/cluster/nic_bandwidth",
     "expected a number of bytes/s or a string such as \"100Gbps\", \"12.5GBps\", \"25GB/s\", got \"fast\""},
    {"UnknownChoice", "collective", R"({"cluster": {"topology": "hypercube"}})", "/cluster/topology",
     "got \"hypercube\""},
    {"MissingFile", "collective", R"({"gradients": {"source": "npy", "files": ["$DIR/none.npy"]}})",
     "/gradients/files/0", "none.npy"},
    {"BadName", "collective", R"({"name": "a b"})", "/name", "a name of letters, digits"},
    {"MissingCompression", "collective", R"({"compression": null})", "/compression", "missing required key"},
    {"UnknownScheme", "collective", R"({"compression": [{"scheme": "fp33"}]})", "/compression/0/scheme",
     "got \"fp33\""},
    {"SchemeParamRange", "collective", R"({"compression": [{"scheme": "int8", "params": {"block": 3}}]})",
     "/compression/0/params/block", "expected an integer in [8, 65536], got the number 3"},
    {"SchemeParamPowerOfTwo", "collective", R"({"compression": [{"scheme": "int8", "params": {"block": 48}}]})",
     "/compression/0/params/block", "power of two"},
    {"SchemeParamUnknown", "collective", R"({"compression": [{"scheme": "int8", "params": {"blok": 256}}]})",
     "/compression/0/params/blok", "did you mean 'block'?"},
    {"SchemeParamsTogether", "collective",
     R"({"compression": [{"scheme": "thc", "params": {"bits": "8", "q": 7}}]})", "/compression/0/params/bits",
     "4 * 127 = 508 > 2^8 - 1 = 255"},
    {"StragglerFieldRange", "training", R"({"stragglers": {"model": "lognormal", "sigma": 9}})",
     "/stragglers/sigma", "expected a number in [0, 5]"},
    {"TenantFieldUnknown", "training", R"({"network": {"tenants": [{"kind": "constant", "rat": "1Gbps"}]}})",
     "/network/tenants/0/rat", "did you mean 'rate'?"},
    {"SyntheticFieldRange", "collective", R"({"gradients": {"correlation": 2}})", "/gradients/correlation",
     "expected a number in [0, 1]"},
    // ---- gradients, kernel costs, cluster
    {"SyntheticSize", "collective", R"({"gradients": {"size": "6B"}})", "/gradients/size",
     "expected a positive multiple of 4 bytes (fp32) for synthetic gradients, got 6"},
    {"NpyWithoutFiles", "collective", R"({"gradients": {"source": "npy"}})", "/gradients/files",
     "expected at least one .npy file"},
    {"DumpWithoutDirectory", "collective", R"({"gradients": {"source": "dump"}})", "/gradients/dump",
     "expected a gradient dump's directory for source \"dump\""},
    {"DumpNotADirectory", "collective",
     R"({"gradients": {"source": "dump", "dump": "$SRC/traces/data/gpt-bpe/manifest.json"}})", "/gradients/dump",
     "expected an existing directory, got"},
    {"DumpWithoutManifest", "collective", R"({"gradients": {"source": "dump", "dump": "$DIR"}})", "/gradients/dump",
     "manifest.json"},
    {"DumpStepMissing", "collective",
     R"({"gradients": {"source": "dump", "dump": "$SRC/traces/data/gpt-bpe", "steps": [7]}})", "/gradients/steps",
     "has no step 7; dumped steps: 50, 200"},
    {"DumpStepsInCollective", "collective",
     R"({"gradients": {"source": "dump", "dump": "$SRC/traces/data/gpt-bpe", "steps": [50, 200]}})",
     "/gradients/steps", "expected at most one step in a collective run (it reduces one gradient), got 2"},
    {"DumpFieldWithoutDumpSource", "collective", R"({"gradients": {"size": "64KB", "steps": [50]}})",
     "/gradients/steps", "applies to source \"dump\" only, and the source is \"synthetic\""},
    {"NpyInTraining", "training", R"({"gradients": {"source": "npy", "files": ["$DIR/a.npy"]}})",
     "/gradients/source", "expected \"synthetic\" or \"dump\" in a training run"},
    {"DumpInTrainingWithoutCalibration", "training",
     R"({"gradients": {"source": "dump", "dump": "$SRC/traces/data/gpt-bpe"}})", "/gradients/dump",
     "a training run reads its dump only to measure the vNMSE a convergence calibration needs"},
    {"ProfileMissing", "collective", R"({"cluster": {"gpu": {"kernel_cost": "profile"}}})", "/cluster/gpu/profile",
     "missing: kernel_cost \"profile\" needs a device cost profile"},
    {"ProfileUnreadable", "collective",
     R"({"cluster": {"gpu": {"kernel_cost": "profile", "profile": "$DIR/bad_profile.json"}}})",
     "/cluster/gpu/profile", "bad_profile.json: /: missing required key 'version'"},
    {"OneRank", "collective", R"({"cluster": {"nodes": 1}})", "/cluster/nodes", "expected at least 2 ranks in all"},
    {"TorusDims", "collective", R"({"cluster": {"topology": "torus", "nodes": 8, "torus": {"dims": [3, 3]}}})",
     "/cluster/torus/dims", "expected sizes whose product equals nodes (8), got 3x3"},
    {"FatTreeRadix", "collective", R"({"cluster": {"topology": "fat_tree", "fat_tree": {"k": 3}}})",
     "/cluster/fat_tree/k", "expected an even number >= 2"},
    {"LeafSpineLeaves", "collective", R"({"cluster": {"topology": "leaf_spine", "leaf_spine": {"leaves": 9}}})",
     "/cluster/leaf_spine/leaves", "expected 0 (auto) or 1..nodes (4), got 9"},
    // ---- the collective section
    {"ParallelismProduct", "collective", R"({"parallelism": {"tp": 3}})", "/parallelism",
     "tp * pp: expected a divisor of the world size (4)"},
    {"SingleRankGroups", "collective", R"({"parallelism": {"tp": 4}, "collective": {"group": "dp"}})",
     "/collective/group", "the dp groups have a single rank"},
    {"NoSuchAlgorithm", "collective", R"({"collective": {"operation": "broadcast", "algorithm": "butterfly"}})",
     "/collective/algorithm", "no algorithm 'butterfly' for broadcast; valid: p2p, ring"},
    {"RootOutsideGroup", "collective", R"({"collective": {"operation": "broadcast", "algorithm": "p2p", "root": 9}})",
     "/collective/root", "expected a rank below the group size 4, got 9"},
    // ---- collective runs
    {"NpyUnreadable", "collective", R"({"gradients": {"source": "npy", "files": ["$DIR/not.npy"]}})",
     "/gradients/files/0", "not a .npy file"},
    {"NpyEmpty", "collective", R"({"gradients": {"source": "npy", "files": ["$DIR/empty.npy"]}})",
     "/gradients/files/0", "empty.npy is empty"},
    // ---- training sections in a run without a workload trace: each set field, not silently ignored
    {"SyncInCollectiveRun", "collective", R"({"sync": {"bucket": "25MB"}})", "/sync/bucket",
     "applies to training runs only: without /workload/trace this scenario times one collective per scheme"},
    {"StragglersInCollectiveRun", "collective", R"({"stragglers": {"model": "uniform", "low": 1, "high": 2}})",
     "/stragglers/model", "applies to training runs only"},
    {"TenantsInCollectiveRun", "collective",
     R"({"network": {"tenants": [{"kind": "ring_allreduce", "size": "1MB"}]}})", "/network/tenants",
     "and /network/tenants would change nothing (add a workload with a compute trace, or remove it)"},
    {"WorkloadWithoutTrace", "collective", R"({"workload": {"rounds": 3}})", "/workload/rounds",
     "applies to training runs only"},
    {"ServingInTrainingRun", "training", R"({"serving": {"layers": 4, "layer_compute": "1ms"}})", "/serving",
     "applies to collective runs only: a training run (workload.trace) times its own layers"},
    {"ServingNegativeCompute", "collective", R"({"serving": {"layers": 4, "layer_compute": "-1ms"}})",
     "/serving/layer_compute", "-1ms"},
    {"ServingNoCollectives", "collective", R"({"serving": {"layers": 4, "collectives_per_layer": 0}})",
     "/serving/collectives_per_layer", "expected an integer in [1, 64], got the number 0"},
    {"NpyNonFinite", "collective", R"({"gradients": {"source": "npy", "files": ["$DIR/a.npy", "$DIR/nan.npy"]}})",
     "/gradients/files/1", "nan.npy: 3 non-finite value(s) (NaN or inf) of 64, the first at index 5: nan"},
    {"NpySizesDiffer", "collective", R"({"gradients": {"source": "npy", "files": ["$DIR/a.npy", "$DIR/b.npy"]}})",
     "/gradients/files/1", "b.npy has 128 elements but"},
    {"AlgorithmShape", "collective", R"({"cluster": {"nodes": 6}, "collective": {"algorithm": "butterfly"}})",
     "/collective/algorithm", "butterfly needs a power-of-two number of ranks >= 2, got 6"},
    {"AlltoallBlocks", "collective",
     R"({"collective": {"operation": "alltoall", "algorithm": "direct"}, "gradients": {"size": "40B"}})",
     "/collective/algorithm", "alltoall needs elements divisible by the ranks"},
    {"DuplicateLabels", "collective", R"({"compression": [{"scheme": "int8"}, {"scheme": "int8", "params": {"block": 256}}]})",
     "/compression/1", "expected a label no other entry has, got 'int8', entry 0's too; give one of them a \"label\""},
    {"DuplicateExplicitLabels", "collective",
     R"({"compression": [{"scheme": "int8", "label": "q"}, {"scheme": "bf16", "label": "q"}]})", "/compression/1/label",
     "expected a label no other entry has, got 'q', entry 0's too"},
    {"MetadataPhaseBeyondTheLimit", "collective",
     R"({"gradients": {"numerics_memory": "1KB"}, "compression": [{"scheme": "dynamiq"}]})", "/compression/0",
     "'dynamiq' plans its metadata phase on each rank's whole gradient, one rank at a time: about 67.17 MB, more "
     "than gradients.numerics_memory 1 KB; set gradients.numerics_memory to at least 67.17 MB"},
    {"AlltoallSchemeBlocks", "collective",
     R"({"cluster": {"gpus_per_node": 2, "nodes": 2}, "collective": {"operation": "alltoall", "algorithm": "direct"},
         "gradients": {"size": "4000B"}, "compression": [{"scheme": "int8"}]})",
     "/compression/0", "blocks of 250 elements (1000 over 4 ranks) do not start on the compressor's blocks of 256"},
    {"PlannedLengthNeedsAllreduce", "collective",
     R"({"collective": {"operation": "reduce_scatter"}, "compression": [{"scheme": "omnireduce"}]})",
     "/compression/0", "which only an allreduce can do, not reduce_scatter"},
    // ---- training runs: workload, stragglers, tenants
    {"NeverEnds", "training", R"({"workload": {"rounds": 0}})", "/workload",
     "expected rounds > 0 or a duration > 0, got neither"},
    {"TraceMissing", "training", R"({"workload": {"trace": "$DIR/none.json"}})", "/workload/trace", "none.json"},
    {"TraceWithoutParams", "training", R"({"workload": {"trace": "$DIR/zero_params.json"}})", "/workload/trace",
     "expected at least one layer with parameters"},
    {"BlocksStart", "training", R"({"workload": {"blocks": [1]}})", "/workload/blocks/0",
     "expected 0 (block starts begin at 0, increase and stay below the trace's 4 layers), got 1"},
    {"BlocksIncrease", "training", R"({"workload": {"blocks": [0, 0]}})", "/workload/blocks/1",
     "expected a larger index"},
    {"EmpiricalWithoutFile", "training", R"({"stragglers": {"model": "empirical"}})", "/stragglers/file",
     "the empirical model needs a CDF file, got none"},
    {"EmpiricalBadFile", "training", R"({"stragglers": {"model": "empirical", "file": "$DIR/bad_cdf.json"}})",
     "/stragglers/file", "expected an array of at least two [value, probability] pairs"},
    {"SlowWorkerOutside", "training", R"({"stragglers": {"model": "persistent", "workers": [9]}})",
     "/stragglers/workers/0", "expected a worker below 4, got 9"},
    {"UniformBounds", "training", R"({"stragglers": {"model": "uniform", "low": 1.2, "high": 1.1}})",
     "/stragglers/high", "expected at least low (1.2), got 1.1"},
    {"TenantRankOutside", "training",
     R"({"network": {"tenants": [{"kind": "constant", "dst": 9, "rate": "1Gbps"}]}})", "/network/tenants/0/dst",
     "expected a rank below 4, got 9"},
    {"TenantWithoutRate", "training", R"({"network": {"tenants": [{"kind": "constant"}]}})",
     "/network/tenants/0/rate", "expected a positive rate"},
    {"TenantRingSize", "training",
     R"({"network": {"tenants": [{"kind": "ring_allreduce", "ranks": [0, 1], "size": "4B"}]}})",
     "/network/tenants/0/size", "expected at least 4 bytes per ring member (8 B), got 4 B"},
    {"TenantOnOff", "training", R"({"network": {"tenants": [{"kind": "onoff", "rate": "1Gbps"}]}})",
     "/network/tenants/0/on", "expected on > 0 and off >= 0"},
    // ---- data-parallel training
    {"DpNotWorld", "training", R"({"parallelism": {"dp": 3}})", "/parallelism",
     "tp * dp * pp: expected the world size (4), got 1 * 3 * 1 = 3"},
    {"AllreduceSyncOperation", "training", R"({"collective": {"operation": "reduce_scatter"}})",
     "/collective/operation", "sync.mode allreduce synchronizes gradients with an allreduce, got reduce_scatter"},
    {"ShardedSyncOperation", "sharded", R"({"collective": {"operation": "allreduce"}})", "/collective/operation",
     "sync.mode sharded reduce-scatters gradients, so expected reduce_scatter, got allreduce"},
    {"BucketAlgorithmShape", "training", R"({"cluster": {"nodes": 6}, "collective": {"algorithm": "butterfly"}})",
     "/collective/algorithm", "butterfly cannot run on a group of 6 ranks"},
    {"SchemeAlgorithmOnBuckets", "training",
     R"({"cluster": {"nodes": 6}, "compression": [{"scheme": "fp32", "algorithm": "butterfly"}]})",
     "/compression/0/algorithm", "a bucket of 11000000 entries: butterfly cannot run 'fp32'"},
    {"WeightsAlgorithmOnBuckets", "sharded",
     R"({"cluster": {"nodes": 6}, "compression": [{"scheme": "fp32", "algorithm": "ring",
                                                   "weights": {"algorithm": "butterfly"}}]})",
     "/compression/0/weights/algorithm", "butterfly needs a power-of-two number of ranks"},
    {"EdgcInDataParallel", "training", R"({"compression": [{"scheme": "powersgd", "controller": {"kind": "edgc"}}]})",
     "/compression/0/controller/kind", "edgc sets the ranks of pipeline stages"},
    {"AqgbWithoutBroadcast", "training", R"({"compression": [{"scheme": "tfp", "controller": {"kind": "aqgb"}}]})",
     "/compression/0/controller/kind", "aqgb drives a broadcast (sync.mode broadcast)"},
    {"SchemeAlgorithm", "training", R"({"compression": [{"scheme": "fp32", "algorithm": "direct"}]})",
     "/compression/0/algorithm", "no algorithm 'direct' for allreduce"},
    {"WeightsAlgorithm", "sharded", R"({"compression": [{"scheme": "fp32", "weights": {"algorithm": "direct"}}]})",
     "/compression/0/weights/algorithm", "no algorithm 'direct' for allgather"},
    {"BucketSchemeOperation", "sharded", R"({"compression": [{"scheme": "omnireduce"}]})", "/compression/0/scheme",
     "which only an allreduce can do, not reduce_scatter"},
    {"WeightsMetadata", "sharded", R"({"compression": [{"scheme": "fp32", "weights": {"scheme": "dynamiq"}}]})",
     "/compression/0/weights/scheme", "'dynamiq' needs a metadata phase, which the weight all-gather does not run"},
    // A plan made from the bucket's draw a piece at a time needs that piece of every rank's draw;
    // THC's may decline and need the whole draw after all; replanning runs rounds on whole draws.
    {"BucketPlanMemory", "training",
     R"({"gradients": {"numerics_memory": "1KB"}, "compression": [{"scheme": "dynamiq"}]})", "/compression/0",
     "planning a 11000000-entry gradient on 4 ranks, 1048576 entries of each at a time, needs 16 MiB of synthetic "
     "gradients (> gradients.numerics_memory 1 KB)"},
    {"BucketPlanMemoryMayDecline", "training",
     R"({"gradients": {"numerics_memory": "1KB"}, "compression": [{"scheme": "thc"}]})", "/compression/0",
     "planning a 11000000-entry gradient on 4 ranks needs 176 MB of synthetic gradients"},
    {"BucketPlanMemoryReplanned", "training",
     R"({"gradients": {"numerics_memory": "1KB"}, "sync": {"replan_every": 2},
         "compression": [{"scheme": "dynamiq"}]})",
     "/compression/0", "planning and running a 11000000-entry gradient on 4 ranks needs 528 MB"},
    {"AqgbNeedsTfp", "broadcast", R"({"compression": [{"scheme": "fp32", "controller": {"kind": "aqgb"}}]})",
     "/compression/0/scheme", "the aqgb controller drives TFP's truncation, so the scheme must be tfp, got fp32"},
    {"BroadcastMetadata", "broadcast", R"({"compression": [{"scheme": "dynamiq"}]})", "/compression/0/scheme",
     "'dynamiq' needs a metadata phase across ranks, which a broadcast does not have"},
    {"BroadcastRoundOps", "broadcast", R"({"compression": [{"scheme": "powersgd"}]})", "/compression/0/scheme",
     "'powersgd' with these params runs prepare around the collective, which a broadcast does not model"},
    // ---- 3D-parallel training
    {"ParallelRounds", "parallel", R"({"workload": {"rounds": 0}})", "/workload/rounds",
     "a tensor/pipeline-parallel run needs rounds > 0, got 0"},
    {"ParallelDuration", "parallel", R"({"workload": {"duration": "1s"}})", "/workload/duration",
     "expected no duration"},
    {"ParallelSyncMode", "parallel", R"({"sync": {"mode": "broadcast"}})", "/sync/mode",
     "expected allreduce, got broadcast"},
    {"ParallelOperation", "parallel", R"({"collective": {"operation": "reduce_scatter"}})", "/collective/operation",
     "expected allreduce (each stage's DP sync), got reduce_scatter"},
    {"ParallelLayout", "parallel", R"({"parallelism": {"tp": 3}})", "/parallelism",
     "tp * pp: expected a divisor of the world size (8) with dp automatic, got 3 * 2 = 6"},
    {"MoreStagesThanLayers", "parallel",
     R"({"workload": {"trace": "$SRC/traces/models/resnet50-aqgb-4blocks.json"},
         "cluster": {"nodes": 8, "gpus_per_node": 1}, "parallelism": {"tp": 1, "pp": 8}})",
     "/parallelism/pp", "8 stages need at least as many layers, got 4"},
    {"ActivationsPerTpRank", "parallel",
     R"({"workload": {"trace": "$DIR/tiny_activations.json"}, "parallelism": {"pp": 1}})", "/parallelism",
     "activation_bytes: expected at least 4 bytes per TP rank (8 B), got 4 B"},
    {"StageAlgorithmShape", "parallel",
     R"({"cluster": {"nodes": 6}, "parallelism": {"pp": 1}, "collective": {"algorithm": "butterfly"}})",
     "/collective/algorithm", "stage 0: butterfly cannot run 'fp16'"},
    {"StageSchemeOnDpGroup", "parallel", R"({"compression": [{"scheme": "thc", "params": {"bits": "8", "q": 8}}]})",
     "/compression/0/params/bits", "8-bit aggregation fields overflow on 2 ranks"},
    {"AqgbInPipeline", "parallel", R"({"compression": [{"scheme": "tfp", "controller": {"kind": "aqgb"}}]})",
     "/compression/0/controller/kind", "aqgb drives a broadcast of data-parallel workers, not a pipeline's stages"},
    {"EdgcNeedsLowRank", "parallel", R"({"compression": [{"scheme": "fp16", "controller": {"kind": "edgc"}}]})",
     "/compression/0/scheme", "the edgc controller sets the ranks of powersgd or edgc, got fp16"},
    {"EdgcRankBounds", "parallel",
     R"({"compression": [{"scheme": "powersgd", "controller": {"kind": "edgc", "r_min": 300, "r_max": 200}}]})",
     "/compression/0/controller/r_max", "expected at least r_min (300), got 200"},
    {"EdgcRankCeiling", "parallel",
     R"({"compression": [{"scheme": "powersgd", "controller": {"kind": "edgc", "r_max": 100000}}]})",
     "/compression/0/controller/r_max", "expected at most 256"},
    {"EdgcEntropySample", "parallel",
     R"({"gradients": {"numerics_memory": "1KB"}, "compression": [{"scheme": "edgc"}]})", "/compression/0",
     "edgc's Algorithm 1 samples the first stage's entropy"},
    {"StagePlanMemory", "parallel",
     R"({"gradients": {"numerics_memory": "1KB"}, "compression": [{"scheme": "dynamiq"}]})", "/compression/0",
     "'dynamiq' agrees on metadata from the gradients each round; planning"},
    // ---- the convergence block (tools/app/tta.cpp)
    {"ConvergenceOnCollective", "collective", R"({"convergence": {"curves": "$DIR/curves.csv"}})", "/convergence",
     "expected a training run (a workload with a trace)"},
    {"ConvergenceBothSources", "training",
     R"({"convergence": {"curves": "$DIR/curves.csv", "calibration": "$DIR/calibration.json"}})", "/convergence",
     "expected one source of rounds-to-target, curves or calibration, got both"},
    {"ConvergenceCurvesMissing", "training", R"({"convergence": {"curves": "$DIR/none.csv"}})",
     "/convergence/curves", "expected an existing file"},
    {"ConvergenceNoCurveForEntry", "training", R"({"convergence": {"curves": "$DIR/curves_bf16.csv"}})",
     "/convergence/curves", "no curve for fp32 (its labels: bf16)"},
    {"ConvergenceCurvesRow", "training", R"({"convergence": {"curves": "$DIR/curves_bad.csv"}})",
     "/convergence/curves", "curves_bad.csv:3: expected 3 fields with an integer round and a number (or nan), got 'fp32,x,3'"},
    {"ConvergenceCurvesColumns", "training",
     R"({"convergence": {"curves": "$DIR/curves.csv", "metric": "accuracy"}})", "/convergence/curves",
     "expected columns label, round and val_accuracy or accuracy (metric accuracy)"},
    {"ConvergenceCurvesOrder", "training", R"({"convergence": {"curves": "$DIR/curves_order.csv"}})",
     "/convergence/curves", "rounds of 'fp32' must increase, got 5 after 10"},
    {"ConvergenceCalibrationField", "training", R"({"convergence": {"calibration": "$DIR/calibration_bad.json"}})",
     "/convergence/calibration", "calibration_bad.json: /families/mxfp/c: expected a finite number, got \"a\""},
    {"ConvergenceCalibrationCurve", "training", R"({"convergence": {"calibration": "$DIR/calibration_curve.json"}})",
     "/convergence/calibration", "calibration_curve.json: /baseline_curve/1: expected [round, value] with rounds increasing"},
    {"ConvergenceBaseline", "training", R"({"convergence": {"curves": "$DIR/curves.csv", "baseline": "bf16"}})",
     "/convergence/baseline", "expected the label of a compression entry (fp32), got 'bf16'"},
    {"ConvergenceTargetSense", "training", R"({"convergence": {"curves": "$DIR/curves.csv", "targets": [0.9]}})",
     "/convergence/targets/0", "expected a target at least 1 for metric loss"},
    {"ConvergenceMetricOfCalibration", "training",
     R"({"convergence": {"calibration": "$DIR/calibration.json", "metric": "accuracy"}})", "/convergence/metric",
     "expected the calibration's metric 'loss', got 'accuracy'"},
    {"ConvergencePhaseLabel", "training",
     R"({"convergence": {"curves": "$DIR/curves.csv", "phases": [{"label": "bf16", "timed_as": "fp32"}]}})",
     "/convergence/phases/0/label", "expected the label of a compression entry (fp32), got 'bf16'"},
    {"ConvergencePhaseTimedAs", "training",
     R"({"convergence": {"curves": "$DIR/curves.csv", "phases": [{"label": "fp32", "timed_as": "fp8"}]}})",
     "/convergence/phases/0/timed_as", "expected the label of a compression entry (fp32), got 'fp8'"},
    {"ConvergencePhaseOrder", "training",
     R"({"convergence": {"curves": "$DIR/curves.csv", "phases": [{"label": "fp32", "from_round": 5, "timed_as": "fp32"},
                                                                 {"label": "fp32", "from_round": 3, "timed_as": "fp32"}]}})",
     "/convergence/phases/1/from_round", "expected more than 5 (the previous phase of 'fp32'), got 3"},
    {"ConvergencePhaseFields", "training",
     R"({"convergence": {"curves": "$DIR/curves.csv", "phases": [{"label": "fp32", "timed": "fp32"}]}})",
     "/convergence/phases/0/timed", "unknown key 'timed'"},
    {"ConvergenceProxyParamsLabel", "training",
     R"({"convergence": {"curves": "$DIR/curves.csv", "proxy": {"params": {"bf16": {}}}}})",
     "/convergence/proxy/params/bf16", "expected the label of a compression entry (fp32), got 'bf16'"},
    {"ConvergenceProxyParamsOfTheScheme", "training",
     R"({"convergence": {"curves": "$DIR/curves.csv", "proxy": {"params": {"fp32": {"rank": 2}}}}})",
     "/convergence/proxy/params/fp32/rank", "rank"},
    {"ConvergenceCalibrationIn3d", "parallel", R"({"convergence": {"calibration": "$DIR/calibration.json"}})",
     "/convergence/calibration", "expected curves in a 3D-parallel run"},
};

void PrintTo(const Check& c, std::ostream* os) { *os << c.name; }

std::string substitute(std::string text, const fs::path& dir) {
  for (const auto& [key, value] : {std::pair<std::string, std::string>{"$DIR", dir.string()},
                                   {"$SRC", kSourceDir.string()}})
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
      text.replace(at, key.size(), value);
  return text;
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

class ValidateCatalog : public ::testing::TestWithParam<Check> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("ccsim-validate-catalog");
    const fs::path d = dir_->path();
    json trace = json::parse(read_file(kSourceDir / "traces/models/resnet50-aqgb-4blocks.json"));
    json zero = trace, tiny = trace;
    for (auto& l : zero["layers"]) l["params"] = 0;
    for (auto& l : tiny["layers"]) l["activation_bytes"] = 4;
    write(d / "zero_params.json", zero.dump());
    write(d / "tiny_activations.json", tiny.dump());
    write(d / "bad_profile.json", R"({"format": "nope"})");
    write(d / "curves.csv", "label,round,val_loss\nfp32,0,4\nfp32,10,3\nfp16,0,4\nfp16,10,3.1\n");
    write(d / "curves_bf16.csv", "label,round,val_loss\nbf16,0,4\n");
    write(d / "curves_bad.csv", "label,round,val_loss\nfp32,0,4\nfp32,x,3\n");
    write(d / "curves_order.csv", "label,round,val_loss\nfp32,10,4\nfp32,5,3\n");
    const std::string calibration =
        R"({"format": "ccsim-convergence-calibration", "version": 2, "metric": "loss",
            "default": {"c": 0.1, "d": 1}, "families": {"mxfp": {"c": 0.2, "d": 1}},
            "baseline_curve": [[0, 2.0], [10, 1.1], [20, 1.0]]})";
    write(d / "calibration.json", calibration);
    json bad_calibration = json::parse(calibration);
    bad_calibration["families"]["mxfp"]["c"] = "a";
    write(d / "calibration_bad.json", bad_calibration.dump());
    bad_calibration = json::parse(calibration);
    bad_calibration["baseline_curve"][1][0] = 0;
    write(d / "calibration_curve.json", bad_calibration.dump());
    write(d / "bad_cdf.json", R"({"format": "ccsim-straggler-cdf", "version": 1, "points": [[1, 0.5]]})");
    write(d / "not.npy", "hello");
    ASSERT_TRUE(traces::write_npy_f32((d / "a.npy").string(), {64}, std::vector<float>(64, 1.0f)).ok());
    ASSERT_TRUE(traces::write_npy_f32((d / "b.npy").string(), {128}, std::vector<float>(128, 1.0f)).ok());
    ASSERT_TRUE(traces::write_npy_f32((d / "empty.npy").string(), {0}, {}).ok());
    std::vector<float> nan(64, 1.0f);
    nan[5] = std::numeric_limits<float>::quiet_NaN();
    nan[6] = -std::numeric_limits<float>::infinity();
    nan[63] = std::numeric_limits<float>::infinity();
    ASSERT_TRUE(traces::write_npy_f32((d / "nan.npy").string(), {64}, nan).ok());
  }
  static void TearDownTestSuite() { delete dir_; }

  // Writes `scenario` as NAME.json; runs `validate` and `run` on it.
  std::pair<Outcome, Outcome> check(const std::string& name, const json& scenario, const fs::path& out) {
    const fs::path file = dir_->path() / (name + ".json");
    write(file, substitute(scenario.dump(2), dir_->path()));
    return {ccsim("validate " + quote(file.string()), *dir_),
            ccsim(fmt::format("run {} --out {}", quote(file.string()), quote(out.string())), *dir_)};
  }
  static TempDir* dir_;
};
TempDir* ValidateCatalog::dir_ = nullptr;

TEST_P(ValidateCatalog, ValidateReportsItAtItsPointerAndRunRejectsTheSame) {
  const Check& c = GetParam();
  json scenario = base(c.base);
  scenario.merge_patch(json::parse(c.patch));
  const fs::path out = dir_->path() / (std::string(c.name) + "-out");
  const auto [validate, run] = check(c.name, scenario, out);
  const std::string file = (dir_->path() / (std::string(c.name) + ".json")).string();
  EXPECT_EQ(validate.code, 2) << show(validate);
  EXPECT_EQ(validate.out, "");
  const std::string where = fmt::format("ccsim: {}: {}: ", file, c.pointer);
  const size_t at = validate.err.find(where);
  ASSERT_NE(at, std::string::npos) << "no report at " << c.pointer << "\n" << show(validate);
  const std::string line = validate.err.substr(at, validate.err.find('\n', at) - at);
  EXPECT_NE(line.find(c.message), std::string::npos)
      << "expected \"" << c.message << "\" in\n" << line;
  EXPECT_EQ(run.code, 2) << show(run);
  EXPECT_EQ(run.err, validate.err) << "run must reject the file with validate's report";
  EXPECT_FALSE(fs::exists(out)) << "a rejected run wrote " << out;
}

INSTANTIATE_TEST_SUITE_P(Checks, ValidateCatalog, ::testing::ValuesIn(kChecks),
                         [](const ::testing::TestParamInfo<Check>& i) { return std::string(i.param.name); });

// Every base is valid: validate says ok and run writes its outputs.
TEST_F(ValidateCatalog, TheBasesPassValidateAndRun) {
  for (const char* kind : {"collective", "training", "broadcast", "sharded", "parallel"}) {
    const fs::path out = dir_->path() / (std::string("base-") + kind + "-out");
    const auto [validate, run] = check(std::string("base-") + kind, base(kind), out);
    EXPECT_EQ(validate.code, 0) << kind << "\n" << show(validate);
    EXPECT_EQ(run.code, 0) << kind << "\n" << show(run);
    EXPECT_TRUE(fs::exists(out / "summary.json")) << kind;
  }
}

// Independent defects of one file are reported together, each at its pointer, by both commands.
TEST_F(ValidateCatalog, EveryDefectOfAFileInOneReport) {
  json scenario = base("training");
  scenario.merge_patch(json::parse(R"({
      "clustr": 1,
      "compression": [{"scheme": "int8", "params": {"block": 3}}, {"scheme": "fp33"}],
      "stragglers": {"model": "persistent", "workers": [9]},
      "network": {"tenants": [{"kind": "constant", "dst": 9, "rate": "1Gbps"}]},
      "outputs": {"link_timeline_bin": "-1s"}})"));
  const fs::path out = dir_->path() / "many-out";
  const auto [validate, run] = check("many", scenario, out);
  EXPECT_EQ(validate.code, 2) << show(validate);
  const std::string file = (dir_->path() / "many.json").string();
  for (const char* pointer : {"/clustr", "/compression/0/params/block", "/compression/1/scheme",
                              "/stragglers/workers/0", "/network/tenants/0/dst", "/outputs/link_timeline_bin"})
    EXPECT_NE(validate.err.find(fmt::format("ccsim: {}: {}: ", file, pointer)), std::string::npos)
        << pointer << " missing\n" << show(validate);
  EXPECT_EQ(run.code, 2);
  EXPECT_EQ(run.err, validate.err);
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace ccsim
