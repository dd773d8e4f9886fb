#pragma once
/// \file
/// A std::vector whose resize() leaves new entries of a trivial type unset. A run's tensors are
/// gigabytes of fresh memory: with std::vector they are first touched by a zero fill on one core,
/// and mapping them is a large part of the run; unset, they are first touched where they are first
/// written, by the generator or a copy running on every core.

#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace ccsim {

template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <class U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  /// Default-initialization: nothing for a trivial type.
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

/// REQUIRES: every entry a resize() adds is written before it is read.
template <class T>
using UninitVector = std::vector<T, UninitAllocator<T>>;

/// Every rank's tensor of a round's numerics, as runs generate, copy and hold them.
using RankTensors = std::vector<UninitVector<float>>;

}  // namespace ccsim
