// ccsim._core: the C++ side of the `ccsim` Python package (tools/python/ccsim/__init__.py wraps
// it). Per-rank tensors arrive through the buffer protocol (NumPy arrays, torch tensors' .numpy()
// views) without a copy when they are fp32; fp16 and bf16 (as 16-bit integers) are widened. Every
// input error is a ValueError carrying ccsim's message; other failures are RuntimeErrors. The GIL
// is released while the numerics run.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/collective_session.hpp"
#include "algorithms/registry.hpp"
#include "kernels/quant/bf16_quant.hpp"
#include "kernels/parallel.hpp"
#include "kernels/quant/fp16_quant.hpp"
#include "tools/app/vnmse.hpp"
#include "topology/collectives/collectives.hpp"
#include "traces/ddp_buckets.hpp"
#include "traces/gradient_dump.hpp"
#include "traces/non_finite.hpp"

namespace py = pybind11;
using nlohmann::json;

namespace ccsim::python {
namespace {

[[noreturn]] void raise(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kUnimplemented:
      throw py::value_error(s.message());
    default:
      throw std::runtime_error(s.message());
  }
}

template <typename T>
T value_or_raise(Result<T> r) {
  if (!r.ok()) raise(r.status());
  return std::move(*r);
}

// JSON text <-> Python objects through the json module (parameters, resolved parameters).
json to_json(const py::handle& obj) {
  const std::string text = py::module_::import("json").attr("dumps")(obj).cast<std::string>();
  return json::parse(text);
}
py::object from_json(const json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

py::object ratio_or_none(const algo::ErrorStats& e) {
  if (e.sq_error == 0 && e.sq_norm == 0) return py::none();
  return py::float_(algo::relative_error(e));
}

// One rank's tensor as fp32: a view of the caller's memory, or a widened copy.
struct RankInput {
  py::buffer_info info;
  std::vector<float> widened;
  std::span<const float> values;
};

// The ranks' tensors, checked: one dtype, C-contiguous, equal sizes, finite.
std::vector<RankInput> read_inputs(const std::vector<py::buffer>& tensors, const std::string& dtype) {
  if (tensors.size() < 2)
    throw py::value_error(fmt::format("tensors: expected one tensor per rank, at least 2, got {}", tensors.size()));
  std::vector<RankInput> in(tensors.size());
  for (size_t r = 0; r < tensors.size(); ++r) {
    RankInput& x = in[r];
    x.info = tensors[r].request();
    const auto n = static_cast<uint64_t>(x.info.size);
    py::ssize_t stride = x.info.itemsize;
    for (py::ssize_t d = x.info.ndim - 1; d >= 0; --d) {
      if (x.info.shape[d] > 1 && x.info.strides[d] != stride)
        throw py::value_error(fmt::format("tensors[{}]: expected a contiguous tensor (C order)", r));
      stride *= x.info.shape[d];
    }
    const std::string& f = x.info.format;
    if (dtype == "float32" && f == "f" && x.info.itemsize == 4) {
      x.values = {static_cast<const float*>(x.info.ptr), n};
    } else if ((dtype == "float16" && f == "e") || (dtype == "bfloat16" && x.info.itemsize == 2 && (f == "H" || f == "h"))) {
      const auto* bits = static_cast<const uint16_t*>(x.info.ptr);
      x.widened.resize(n);
      for (uint64_t i = 0; i < n; ++i)
        x.widened[i] = dtype == "float16" ? kern::fp16_to_float(bits[i]) : kern::bf16_to_float(bits[i]);
      x.values = x.widened;
    } else {
      throw py::value_error(fmt::format("tensors[{}]: expected {} data, got buffer format '{}' ({} bytes per entry)",
                                        r, dtype, f, x.info.itemsize));
    }
    if (x.values.size() != in[0].values.size())
      throw py::value_error(fmt::format("tensors[{}]: expected {} entries as tensors[0] has, got {}", r,
                                        in[0].values.size(), x.values.size()));
    if (x.values.empty()) throw py::value_error(fmt::format("tensors[{}]: expected at least one entry", r));
    if (const traces::NonFinite bad = traces::find_non_finite(x.values); bad.count > 0)
      throw py::value_error(fmt::format("tensors[{}][{}]: expected finite values, got {} ({} non-finite entries)", r,
                                        bad.first, bad.value, bad.count));
  }
  return in;
}

// A layer layout from (rows, cols) pairs tiling `elements` entries in order.
std::vector<algo::LayerShape> read_layout(const std::vector<std::pair<uint64_t, uint64_t>>& layers,
                                          uint64_t elements) {
  std::vector<algo::LayerShape> layout;
  uint64_t offset = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    const auto [rows, cols] = layers[l];
    if (rows == 0 || cols == 0 || rows > elements || cols > elements / rows)
      throw py::value_error(fmt::format("layers[{}]: expected a shape of at least one entry, got {} x {}", l, rows, cols));
    layout.push_back({offset, rows * cols, rows, cols});
    offset += rows * cols;
    if (offset > elements) break;
  }
  if (!layers.empty() && offset != elements)
    throw py::value_error(fmt::format("layers: expected shapes covering the tensor's {} entries, they cover {}",
                                      elements, offset));
  return layout;
}

py::dict decision_dict(const algo::PlanDecision& d) {
  py::dict out;
  out["quantity"] = d.quantity;
  out["value"] = d.value;
  out["detail"] = d.detail;
  return out;
}

// One scheme instance on one collective, round after round (algorithms/collective_session.hpp).
class Session {
 public:
  Session(const std::string& scheme, const py::object& params, const std::string& operation,
          const std::string& algorithm, uint32_t ranks, uint64_t elements, uint64_t seed, uint32_t gpus_per_node,
          uint32_t segments, const std::vector<std::pair<uint64_t, uint64_t>>& layers)
      : layout_(read_layout(layers, elements)) {
    if (ranks < 2) throw py::value_error(fmt::format("ranks: expected at least 2, got {}", ranks));
    if (elements == 0) throw py::value_error("tensors: expected at least one entry per rank");
    collective_ = value_or_raise(topo::find_collective(operation, algorithm));
    topo::CollectiveOptions base;
    base.gpus_per_node = gpus_per_node;
    base.segments = segments;
    const json p = params.is_none() ? json::object() : to_json(params);
    if (!p.is_object()) throw py::value_error("params: expected a dict of the scheme's parameters");
    auto made = algo::CollectiveSession::create(scheme, p, *collective_, ranks, elements, base, layout_, seed);
    if (!made.ok()) raise(made.status());
    session_ = std::move(*made);
  }

  py::dict run(const std::vector<py::buffer>& tensors, const std::string& dtype, bool hop_errors) {
    std::vector<RankInput> in = read_inputs(tensors, dtype);
    if (in.size() != session_->ranks() || in[0].values.size() != session_->elements())
      throw py::value_error(fmt::format("tensors: expected {} ranks of {} entries (as this collective was made for), "
                                        "got {} of {}",
                                        session_->ranks(), session_->elements(), in.size(), in[0].values.size()));
    std::vector<py::array_t<float>> arrays;
    std::vector<std::span<const float>> ins;
    std::vector<std::span<float>> outs;
    for (const RankInput& x : in) {
      arrays.emplace_back(static_cast<py::ssize_t>(x.values.size()));
      outs.emplace_back(arrays.back().mutable_data(), x.values.size());
      ins.push_back(x.values);
    }
    Result<algo::SessionRound> round = internal_error("not run");
    std::vector<algo::ErrorStats> layers;
    {
      py::gil_scoped_release unlocked;
      round = session_->run(ins, outs, hop_errors);
      if (round.ok() && !layout_.empty() && collective_->operation == topo::CollectiveOp::kAllReduce) {
        std::vector<std::span<const float>> ends(outs.begin(), outs.end());
        layers = algo::allreduce_layer_errors(ins, ends, layout_);
      }
    }
    if (!round.ok()) raise(round.status());
    return result_dict(*round, arrays, layers, hop_errors);
  }

  uint32_t round() const { return session_->round(); }
  uint32_t ranks() const { return session_->ranks(); }
  uint64_t elements() const { return session_->elements(); }
  py::object resolved_params() const { return from_json(session_->resolved_params()); }
  bool unbiased() const { return session_->compressor().unbiased(); }
  std::string determinism() const { return std::string(algo::determinism_name(session_->compressor().determinism())); }

 private:
  py::dict result_dict(const algo::SessionRound& round, const std::vector<py::array_t<float>>& arrays,
                       const std::vector<algo::ErrorStats>& layers, bool hop_errors) const {
    py::dict out;
    py::list outputs, rank_vnmse, decisions, layer_vnmse;
    for (const auto& a : arrays) outputs.append(a);
    double mse = 0, worst = 0;
    const auto entries = static_cast<double>(session_->elements());
    for (const algo::ErrorStats& e : round.errors) {
      rank_vnmse.append(algo::relative_error(e));
      worst = std::max(worst, algo::relative_error(e));
      mse += e.sq_error / entries / static_cast<double>(round.errors.size());
    }
    for (const algo::PlanDecision& d : round.decisions) decisions.append(decision_dict(d));
    for (const algo::ErrorStats& e : layers) layer_vnmse.append(algo::relative_error(e));
    out["outputs"] = outputs;
    out["round"] = round.round;
    out["vnmse"] = algo::vnmse(round.errors);
    out["rank_vnmse"] = rank_vnmse;
    out["vnmse_max_rank"] = worst;
    out["mse"] = mse;
    out["bits_per_entry"] = round.bits_per_entry;
    out["plan_bytes_per_rank"] = round.plan.wire_bytes_per_rank;
    out["tensor_wire_bytes"] = round.bytes.tensor();
    out["payload_bits_per_entry"] = algo::RoundBytes::bits(round.bytes.payload, session_->elements());
    out["metadata_bits_per_entry"] = algo::RoundBytes::bits(round.bytes.metadata, session_->elements());
    out["plan_bits_per_entry"] = algo::RoundBytes::bits(round.bytes.plan, session_->elements());
    out["wire_bytes"] = round.stats.wire_bytes;
    out["decisions"] = decisions;
    out["layer_vnmse"] = layers.empty() ? py::object(py::none()) : py::object(layer_vnmse);
    if (hop_errors) {
      py::list hops;
      for (size_t h = 1; h < round.stats.hop_errors.size(); ++h) hops.append(ratio_or_none(round.stats.hop_errors[h]));
      out["hop_vnmse"] = hops;
    } else {
      out["hop_vnmse"] = py::none();
    }
    return out;
  }

  std::vector<algo::LayerShape> layout_;
  const topo::CollectiveInfo* collective_ = nullptr;
  std::unique_ptr<algo::CollectiveSession> session_;
};

py::list schemes() {
  py::list out;
  for (const algo::CompressorInfo& info : algo::CompressorRegistry::global().all()) {
    py::dict s;
    s["name"] = info.name;
    s["description"] = info.description;
    auto made = algo::CompressorRegistry::global().create(info.name, json::object());
    if (!made.ok()) raise(made.status());
    s["unbiased"] = (*made)->unbiased();
    s["determinism"] = std::string(algo::determinism_name((*made)->determinism()));
    py::list params;
    for (const algo::ParamSpec& p : info.params.specs()) {
      py::dict d;
      d["name"] = p.name;
      d["description"] = p.description;
      d["default"] = from_json(p.default_value);
      d["min"] = p.min ? py::object(py::float_(*p.min)) : py::object(py::none());
      d["max"] = p.max ? py::object(py::float_(*p.max)) : py::object(py::none());
      d["choices"] = p.choices;
      d["power_of_two"] = p.power_of_two;
      params.append(d);
    }
    s["params"] = params;
    out.append(s);
  }
  return out;
}

py::list collectives() {
  py::list out;
  for (const topo::CollectiveInfo& c : topo::known_collectives()) {
    py::dict d;
    d["operation"] = std::string(topo::collective_op_name(c.operation));
    d["algorithm"] = c.algorithm;
    d["description"] = c.description;
    out.append(d);
  }
  return out;
}

// `ccsim vnmse` as data: the options as keyword arguments (VnmseOptions' fields), the report as dicts.
py::dict vnmse(const py::dict& kwargs) {
  app::VnmseOptions o;
  for (const auto& [key, value] : kwargs) {
    const std::string k = key.cast<std::string>();
    auto set = [&, v = value](auto& field) {
      try {
        field = v.cast<std::remove_reference_t<decltype(field)>>();
      } catch (const py::cast_error&) {
        throw py::value_error(fmt::format("vnmse: {}: expected {}, got {}", k,
                                          std::is_same_v<std::remove_reference_t<decltype(field)>, std::string>
                                              ? "a string" : "a non-negative integer or a list of them",
                                          py::repr(v).cast<std::string>()));
      }
    };
    if (k == "gradients") set(o.gradients);
    else if (k == "synthetic") set(o.synthetic);
    else if (k == "structure") set(o.structure);
    else if (k == "algos") set(o.algos);
    else if (k == "params") set(o.params);
    else if (k == "operation") set(o.operation);
    else if (k == "collective") set(o.algorithm);
    else if (k == "ranks") set(o.ranks);
    else if (k == "steps") set(o.steps);
    else if (k == "seeds") set(o.seeds);
    else if (k == "warmup") set(o.warmup);
    else if (k == "seed") set(o.seed);
    else if (k == "gpus_per_node") set(o.gpus_per_node);
    else if (k == "segments") set(o.segments);
    else if (k == "max_elements") set(o.max_elements);
    else if (k == "bucket") set(o.bucket);
    else if (k == "ddp_bucket") set(o.ddp_bucket);
    else if (k == "ddp_first_bucket") set(o.ddp_first_bucket);
    else throw py::value_error(fmt::format("vnmse: unknown option '{}'", k));
  }
  Result<app::VnmseReport> made = internal_error("not run");
  {
    py::gil_scoped_release unlocked;
    made = app::run_vnmse(o);
  }
  if (!made.ok()) raise(made.status());
  const app::VnmseReport& report = *made;
  py::list rows;
  for (const algo::ErrorRow& r : report.rows) {
    py::dict d;
    d["label"] = r.label;
    d["scheme"] = r.scheme;
    d["params"] = from_json(r.params);
    d["step"] = r.step;
    d["vnmse"] = r.vnmse;
    d["vnmse_std"] = r.vnmse_std;
    d["vnmse_max_rank"] = r.vnmse_max_rank;
    d["mse"] = r.mse;
    d["bias"] = r.bias;
    d["bias_floor"] = r.bias_floor;
    d["bits_per_entry"] = r.bits_per_entry;
    d["payload_bits_per_entry"] = r.payload_bits;
    d["metadata_bits_per_entry"] = r.metadata_bits;
    d["plan_bits_per_entry"] = r.plan_bits;
    d["plan_bytes_per_rank"] = r.plan_bytes_per_rank;
    d["wire_bytes"] = r.wire_bytes;
    d["unbiased"] = r.unbiased;
    d["layer_vnmse"] = r.layer_vnmse;
    py::list hops;
    for (double h : r.hop_vnmse) hops.append(std::isnan(h) ? py::object(py::none()) : py::object(py::float_(h)));
    d["hop_vnmse"] = hops;
    rows.append(d);
  }
  py::dict out;
  out["rows"] = rows;
  out["gradients"] = report.gradients_desc;
  out["collective"] = report.collective_desc;
  out["sampling"] = report.sampling_note;
  out["ranks"] = report.ranks;
  out["elements"] = report.elements;
  out["layer_names"] = report.layer_names;
  out["text"] = app::format_vnmse(report, false);
  out["csv"] = app::vnmse_csv(report);
  return out;
}

// PyTorch DDP's buckets of layers of `sizes` entries (model order): each bucket's layer indices in
// backward order, buckets in the order DDP fills and numbers them (bucket 0 holds the last layers).
std::vector<std::vector<uint32_t>> ddp_buckets(const std::vector<uint64_t>& sizes, uint64_t cap, uint64_t first,
                                               uint32_t bytes_per_param) {
  if (sizes.empty()) throw py::value_error("sizes: expected at least one layer");
  if (cap == 0) throw py::value_error("bucket_cap: expected at least 1 byte");
  std::vector<std::vector<uint32_t>> out;
  for (const traces::GradientBucket& b : traces::make_ddp_buckets(sizes, cap, first, bytes_per_param))
    out.push_back(b.layers);
  return out;
}

// A gradient dump (traces/gradient_dump.hpp): its manifest as data and its workers' tensors.
class Dump {
 public:
  explicit Dump(const std::string& dir) : dump_(value_or_raise(traces::GradientDump::open(dir))) {}

  py::dict info() const {
    py::dict out;
    out["dir"] = dump_.dir().string();
    out["workers"] = dump_.workers();
    out["elements"] = dump_.elements();
    py::list steps, layers;
    for (const traces::GradientStep& s : dump_.step_info()) {
      py::dict d;
      d["step"] = s.step;
      d["tensor"] = s.tensor;
      d["loss"] = s.loss ? py::object(py::float_(*s.loss)) : py::object(py::none());
      steps.append(d);
    }
    for (const traces::GradientLayer& l : dump_.layers()) {
      py::dict d;
      d["name"] = l.name;
      d["shape"] = l.shape;
      d["offset"] = l.offset;
      d["count"] = l.count;
      layers.append(d);
    }
    out["steps"] = steps;
    out["layers"] = layers;
    out["model"] = dump_.provenance().model;
    out["dataset"] = dump_.provenance().dataset;
    return out;
  }

  py::array_t<float> worker(uint32_t w, size_t step) const {
    if (w >= dump_.workers())
      throw py::value_error(fmt::format("worker: expected 0 .. {}, got {}", dump_.workers() - 1, w));
    if (step >= dump_.steps())
      throw py::value_error(fmt::format("step_index: expected 0 .. {}, got {}", dump_.steps() - 1, step));
    traces::GradientVector v = value_or_raise(dump_.worker(w, step));
    py::array_t<float> out(static_cast<py::ssize_t>(v.size()));
    std::copy(v.values().begin(), v.values().end(), out.mutable_data());
    return out;
  }

 private:
  traces::GradientDump dump_;
};

}  // namespace
}  // namespace ccsim::python

PYBIND11_MODULE(_core, m) {
  using namespace ccsim::python;
  m.doc() = "ccsim's compressors and collectives on real tensors (the C++ side of the ccsim package)";
  m.def("schemes", &schemes, "every registered compression scheme, with its parameters");
  m.def("collectives", &collectives, "every collective operation and algorithm");
  m.def("vnmse", [](py::kwargs kw) { return vnmse(kw); }, "`ccsim vnmse` with its options as keyword arguments");
  m.def(
      "check_scheme",
      [](const std::string& scheme, const py::object& params) {
        auto made = ccsim::algo::CompressorRegistry::global().create(scheme, to_json(params));
        if (!made.ok()) raise(made.status());
      },
      py::arg("scheme"), py::arg("params"), "ValueError unless the scheme exists and takes these parameters");
  m.def(
      "scheme_label",
      [](const std::string& scheme, const py::object& params) {
        return ccsim::algo::scheme_label(scheme, to_json(params));
      },
      py::arg("scheme"), py::arg("params"), "the entry's default label in every output (algo::scheme_label)");
  m.def("threads", &ccsim::kern::worker_threads, "worker threads the numerics use");
  m.def(
      "set_threads",
      [](int n) {
        if (n < 1) throw py::value_error(fmt::format("threads: expected at least 1, got {}", n));
        ccsim::kern::set_worker_threads(n);
      },
      py::arg("n"), "worker threads the numerics use (results do not depend on it)");
  m.def("ddp_buckets", &ddp_buckets, py::arg("sizes"), py::arg("bucket_cap"), py::arg("first_bucket_cap"),
        py::arg("bytes_per_param"));
  py::class_<Session>(m, "Session")
      .def(py::init<const std::string&, const py::object&, const std::string&, const std::string&, uint32_t, uint64_t,
                    uint64_t, uint32_t, uint32_t, const std::vector<std::pair<uint64_t, uint64_t>>&>(),
           py::arg("scheme"), py::arg("params"), py::arg("operation"), py::arg("algorithm"), py::arg("ranks"),
           py::arg("elements"), py::arg("seed"), py::arg("gpus_per_node"), py::arg("segments"), py::arg("layers"))
      .def("run", &Session::run, py::arg("tensors"), py::arg("dtype"), py::arg("hop_errors"))
      .def_property_readonly("round", &Session::round)
      .def_property_readonly("ranks", &Session::ranks)
      .def_property_readonly("elements", &Session::elements)
      .def_property_readonly("resolved_params", &Session::resolved_params)
      .def_property_readonly("unbiased", &Session::unbiased)
      .def_property_readonly("determinism", &Session::determinism);
  py::class_<Dump>(m, "Dump")
      .def(py::init<const std::string&>(), py::arg("dir"))
      .def("info", &Dump::info)
      .def("worker", &Dump::worker, py::arg("worker"), py::arg("step_index"));
}
