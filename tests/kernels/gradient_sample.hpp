#pragma once
// A real gradient for the CUDA kernel tests: the shipped dump traces/data/gpt-bpe, read on the host
// (compiled by the C++ compiler: the dump reader's headers stay out of nvcc).

#include <cstdint>
#include <string>
#include <vector>

namespace ccsim::test {

/// `count` consecutive values of worker `worker`'s gradient at the dump's first step, starting at
/// element `offset` and wrapping around at the end of the vector. Sets `error` (and returns an
/// empty vector) if the dump cannot be read.
std::vector<float> shipped_gradient(uint32_t worker, uint64_t offset, uint64_t count, std::string& error);

}  // namespace ccsim::test
