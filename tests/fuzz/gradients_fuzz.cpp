// Fuzz target: the gradient-file readers. The first byte picks what the rest is: a .npy file
// (traces/npy.hpp), a safetensors file (traces/safetensors.hpp, every tensor read as fp32), a dump's
// manifest.json over a fixed valid worker file, or a dump's worker file under a fixed manifest
// (traces/gradient_dump.hpp, every worker and step read). Each must read or refuse with an input
// error; values read are finite (the non-finite policy refuses the rest).

#include <cmath>

#include "tests/fuzz/fuzz_files.hpp"
#include "traces/gradient_dump.hpp"
#include "traces/npy.hpp"
#include "traces/safetensors.hpp"

namespace {

using ccsim::fuzz::fuzz_dir;

void check(const ccsim::Status& st) {
  if (!st.ok() && (!st.is_input_error() || st.message().empty())) __builtin_trap();
}

void read_dump(const std::filesystem::path& dir) {
  const auto dump = ccsim::traces::GradientDump::open(dir);
  if (!dump.ok()) return check(dump.status());
  for (uint32_t w = 0; w < dump->workers(); ++w)
    for (size_t s = 0; s < dump->steps(); ++s) {
      const auto v = dump->worker(w, s);
      if (!v.ok()) {
        check(v.status());
        continue;
      }
      if (v->size() != dump->elements()) __builtin_trap();
      for (const float x : v->values())
        if (!std::isfinite(x)) __builtin_trap();
    }
}

// A valid one-step, two-layer safetensors worker file of 8 fp32 values under tensor "step1".
std::string worker_file() {
  std::string header = R"({"step1":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})";
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  for (int i = 0; i < 8; ++i) {
    const float x = 0.5f * static_cast<float>(i) - 1.0f;
    out.append(reinterpret_cast<const char*>(&x), 4);
  }
  return out;
}

constexpr const char* kManifest = R"({"format": "ccsim-gradient-dump", "version": 1, "dtype": "F32", "elements": 8,
  "workers": ["w0.safetensors"], "steps": [{"step": 1, "tensor": "step1"}],
  "layers": [{"name": "a", "shape": [2, 3], "offset": 0, "count": 6},
             {"name": "b", "shape": [2], "offset": 6, "count": 2}]})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest = ccsim::fuzz::as_text(data + 1, size - 1);
  const auto& dir = fuzz_dir();
  const std::filesystem::path dump = dir.path() / "dump";
  switch (data[0] % 4) {
    case 0: {
      const std::string path = dir.write("x.npy", std::string(rest)).string();
      const auto a = ccsim::traces::read_npy(path);
      if (!a.ok()) return check(a.status()), 0;
      check(ccsim::traces::check_finite_npy(path, a->values));
      return 0;
    }
    case 1: {
      const auto f = ccsim::traces::SafetensorsFile::open(dir.write("x.safetensors", std::string(rest)));
      if (!f.ok()) return check(f.status()), 0;
      for (const auto& t : f->tensors()) {
        const auto v = f->read_f32(t.name);
        if (!v.ok()) check(v.status());
      }
      return 0;
    }
    case 2:
      dir.write("dump/w0.safetensors", worker_file());
      dir.write("dump/manifest.json", std::string(rest));
      read_dump(dump);
      return 0;
    default:
      dir.write("dump/manifest.json", kManifest);
      dir.write("dump/w0.safetensors", std::string(rest));
      read_dump(dump);
      return 0;
  }
}
