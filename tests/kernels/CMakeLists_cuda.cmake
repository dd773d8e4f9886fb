# CUDA kernel tests; include()d from tests/CMakeLists.txt. They carry the `gpu` label and skip
# themselves (GTEST_SKIP) when no device is present, so CPU-only machines with nvcc still pass.
if(CCSIM_HAVE_CUDA)
  # What the GPU suites share besides tests/kernels/cuda_test_support.cuh: slices of the shipped real
  # gradient dump, read by host-compiled code (the dump reader's headers stay out of nvcc).
  ccsim_add_library(NAME ccsim_cuda_test_support SRCS ${CMAKE_CURRENT_LIST_DIR}/gradient_sample.cpp DEPS ccsim_traces)
  target_compile_definitions(ccsim_cuda_test_support PRIVATE CCSIM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")

  ccsim_add_test(NAME quant_cuda_test
    SRCS ${CMAKE_CURRENT_LIST_DIR}/quant_cuda_test.cu
    DEPS ccsim_kernels_cuda ccsim_cuda_test_support fmt::fmt
    LABELS gpu unit)
  # DynamiQ's kernels against the CPU compressor, on synthetic inputs and the shipped gradient dump.
  ccsim_add_test(NAME dynamiq_cuda_test
    SRCS ${CMAKE_CURRENT_LIST_DIR}/dynamiq_cuda_test.cu
    DEPS ccsim_kernels_cuda ccsim_cuda_test_support ccsim_algorithms ccsim_traces fmt::fmt
    LABELS gpu unit)
  target_compile_definitions(dynamiq_cuda_test PRIVATE CCSIM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  # The MX, group-quantization, TFP, QSGD and FP16 kernels (kernels/cuda/block_cuda.hpp).
  ccsim_add_test(NAME block_cuda_test
    SRCS ${CMAKE_CURRENT_LIST_DIR}/block_cuda_test.cu ${CMAKE_CURRENT_LIST_DIR}/block_cuda_elem_test.cu
    DEPS ccsim_kernels_cuda ccsim_cuda_test_support fmt::fmt
    LABELS gpu unit)
endif()
# The schemes' device ops, the cases of `ccsim bench-kernels --device cuda` (algorithms/device_ops.hpp).
if(CCSIM_HAVE_CUDA)
  ccsim_add_test(NAME bench_cuda_test
    SRCS ${CMAKE_CURRENT_LIST_DIR}/bench_cuda_test.cpp
    DEPS ccsim_algorithms ccsim_traces fmt::fmt
    LABELS gpu unit)
endif()
# THC's kernels (kernels/cuda/thc_cuda.hpp: Hadamard transforms, max |x|, plan_local, prepare,
# finish and the wire) against the CPU references and the CPU compressor, the shipped dump included.
if(CCSIM_HAVE_CUDA)
  ccsim_add_test(NAME thc_cuda_test
    SRCS ${CMAKE_CURRENT_LIST_DIR}/thc_cuda_test.cu
    DEPS ccsim_kernels_cuda ccsim_cuda_test_support ccsim_algorithms ccsim_traces fmt::fmt
    LABELS gpu unit)
  target_compile_definitions(thc_cuda_test PRIVATE CCSIM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
# OmniReduce's chunk selection, the entropy histogram and the PowerSGD kernels against their CPU
# references (the compressor, kernels/stats/, kernels/linalg/), on synthetic inputs and the
# shipped gradient dump. The host side of these tests replays the kernels' double arithmetic
# (cr_math.cuh), so it must not contract multiply-adds either.
if(CCSIM_HAVE_CUDA)
  ccsim_add_test(NAME select_cuda_test
    SRCS ${CMAKE_CURRENT_LIST_DIR}/select_cuda_test.cu
    DEPS ccsim_kernels_cuda ccsim_cuda_test_support ccsim_algorithms ccsim_traces fmt::fmt
    LABELS gpu unit)
  ccsim_add_test(NAME entropy_cuda_test
    SRCS ${CMAKE_CURRENT_LIST_DIR}/entropy_cuda_test.cu
    DEPS ccsim_kernels_cuda ccsim_cuda_test_support ccsim_traces fmt::fmt
    LABELS gpu unit)
  ccsim_add_test(NAME lowrank_cuda_test
    SRCS ${CMAKE_CURRENT_LIST_DIR}/lowrank_cuda_test.cu
    DEPS ccsim_kernels_cuda ccsim_cuda_test_support ccsim_traces fmt::fmt
    LABELS gpu unit)
  foreach(t select_cuda_test entropy_cuda_test lowrank_cuda_test)
    target_compile_definitions(${t} PRIVATE CCSIM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
    target_compile_options(${t} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--fmad=false -Xcompiler=-ffp-contract=off>)
  endforeach()
endif()
# The round-phase kernels (kernels/cuda/round_cuda.hpp: DynamiQ, OmniReduce, MX global scaling and
# SDP4Bit prepare / finish / plan_local) against the CPU compressors from the registry.
if(CCSIM_HAVE_CUDA)
  ccsim_add_test(NAME round_cuda_test
    SRCS ${CMAKE_CURRENT_LIST_DIR}/round_cuda_test.cu
    DEPS ccsim_kernels_cuda ccsim_cuda_test_support ccsim_algorithms ccsim_traces fmt::fmt
    LABELS gpu unit)
  target_compile_definitions(round_cuda_test PRIVATE CCSIM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
