// The main() of a fuzz target in builds without libFuzzer: replays a seed corpus, then runs a
// bounded, seeded series of mutations of it, so that every build (and tools/test) exercises each
// target with the same inputs. A crash, a trap or a sanitizer report fails the run; so does a hang
// (ctest's timeout). With clang, the same target links with libFuzzer for long, coverage-guided runs
// (tools/fuzz).
//
//   fuzz_NAME [--runs N] [--seed S] [--max-len L] CORPUS_DIR_OR_FILE...
//
// The mutations are deterministic for a seed: a failing input is printed as its run number and
// written to ./fuzz-failure-<name>.bin before the target runs, so it can be replayed.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_files.hpp"

namespace {

using Bytes = std::vector<uint8_t>;

// splitmix64: a tiny deterministic generator for the mutations.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }
};

// Tokens that break parsers in interesting ways.
const char* const kTokens[] = {"{", "}", "[", "]", "\"", ",", ":", "null", "true", "-1", "0", "1e400", "-0",
                               "18446744073709551616", "9223372036854775807", "NaN", "\\u0000", "\xff",
                               "\"\":", "1e-400", "4294967296", "..", "/", "=", "{\"a\":1,\"a\":2}",
                               "\x93NUMPY", "'descr': '<f4'", "'shape': (", "\"data_offsets\":"};

void mutate(Bytes& b, const std::vector<Bytes>& corpus, Rng& rng, size_t max_len) {
  const size_t n = 1 + rng.below(4);
  for (size_t k = 0; k < n; ++k) {
    switch (rng.below(7)) {
      case 0:  // flip a bit
        if (!b.empty()) b[rng.below(b.size())] ^= static_cast<uint8_t>(1u << rng.below(8));
        break;
      case 1:  // set a byte
        if (!b.empty()) b[rng.below(b.size())] = static_cast<uint8_t>(rng.next());
        break;
      case 2: {  // delete a range
        if (b.empty()) break;
        const size_t at = rng.below(b.size()), len = 1 + rng.below(std::min<size_t>(16, b.size() - at));
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + len));
        break;
      }
      case 3: {  // insert a token
        const char* t = kTokens[rng.below(std::size(kTokens))];
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(rng.below(b.size() + 1)), t, t + std::strlen(t));
        break;
      }
      case 4: {  // duplicate a range
        if (b.empty()) break;
        const size_t at = rng.below(b.size()), len = 1 + rng.below(std::min<size_t>(64, b.size() - at));
        const auto from = b.begin() + static_cast<std::ptrdiff_t>(at);
        const Bytes piece(from, from + static_cast<std::ptrdiff_t>(len));
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(rng.below(b.size() + 1)), piece.begin(), piece.end());
        break;
      }
      case 5:  // truncate
        b.resize(rng.below(b.size() + 1));
        break;
      default: {  // splice another entry's tail
        const Bytes& o = corpus[rng.below(corpus.size())];
        if (o.empty()) break;
        const size_t keep = rng.below(b.size() + 1), from = rng.below(o.size());
        b.resize(keep);
        b.insert(b.end(), o.begin() + static_cast<std::ptrdiff_t>(from), o.end());
        break;
      }
    }
  }
  if (b.size() > max_len) b.resize(max_len);
}

Bytes read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--runs N] [--seed S] [--max-len L] CORPUS_DIR_OR_FILE...\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t runs = 0, seed = 1;
  size_t max_len = 1 << 16;
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--runs" || a == "--seed" || a == "--max-len") && i + 1 < argc) {
      const uint64_t v = std::strtoull(argv[++i], nullptr, 10);
      if (a == "--runs") runs = v;
      else if (a == "--seed") seed = v;
      else max_len = static_cast<size_t>(v);
    } else if (a.rfind("--", 0) == 0) {
      return usage(argv[0]);
    } else if (std::filesystem::is_directory(a)) {
      for (const auto& e : std::filesystem::directory_iterator(a))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.emplace_back(a);
    }
  }
  if (files.empty()) return usage(argv[0]);
  std::sort(files.begin(), files.end());
  std::vector<Bytes> corpus;
  for (const auto& f : files) corpus.push_back(read_bytes(f));
  const std::string name = std::filesystem::path(argv[0]).filename().string();
  const std::string failure = "fuzz-failure-" + name + ".bin";
  auto run_one = [&](const Bytes& b) {
    std::ofstream(failure, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    LLVMFuzzerTestOneInput(b.data(), b.size());
  };
  for (const Bytes& b : corpus) run_one(b);
  Rng rng{seed};
  for (uint64_t r = 0; r < runs; ++r) {
    Bytes b = corpus[rng.below(corpus.size())];
    mutate(b, corpus, rng, max_len);
    run_one(b);
  }
  std::filesystem::remove(failure);
  std::printf("%s: %zu corpus inputs and %llu mutations (seed %llu) ran without a finding\n", name.c_str(),
              corpus.size(), static_cast<unsigned long long>(runs), static_cast<unsigned long long>(seed));
  return 0;
}
