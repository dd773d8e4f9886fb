# CUDA kernel tests; include()d from tests/CMakeLists.txt. They carry the `gpu` label and skip
# themselves (GTEST_SKIP) when no device is present, so CPU-only machines with nvcc still pass.
if(CCSIM_HAVE_CUDA)
  ccsim_add_test(NAME quant_cuda_test
    SRCS ${CMAKE_CURRENT_LIST_DIR}/quant_cuda_test.cu
    DEPS ccsim_kernels_cuda fmt::fmt
    LABELS gpu unit)
  # DynamiQ's kernels against the CPU compressor, on synthetic inputs and the shipped gradient dump.
  ccsim_add_test(NAME dynamiq_cuda_test
    SRCS ${CMAKE_CURRENT_LIST_DIR}/dynamiq_cuda_test.cu
    DEPS ccsim_kernels_cuda ccsim_algorithms ccsim_traces fmt::fmt
    LABELS gpu unit)
  target_compile_definitions(dynamiq_cuda_test PRIVATE CCSIM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
