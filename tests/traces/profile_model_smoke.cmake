# ctest profile_model_smoke (cmake -P): tools/profile_model.py times the tiny preset on the CPU and
# writes OUT; then traces_test --gtest_filter=ProfiledTrace.* loads it (CCSIM_PROFILED_TRACE=OUT).
# Variables: PYTHON (an interpreter with PyTorch), SOURCE_DIR, TRACES_TEST, OUT.
foreach(var PYTHON SOURCE_DIR TRACES_TEST OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "profile_model_smoke: -D${var}=... is required")
  endif()
endforeach()

file(REMOVE ${OUT})
execute_process(
  COMMAND ${PYTHON} ${SOURCE_DIR}/tools/profile_model.py --preset tiny --device cpu --iters 3 --warmup 1 --out ${OUT}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "profile_model_smoke: tools/profile_model.py failed (exit ${rc})")
endif()
if(NOT EXISTS ${OUT})
  message(FATAL_ERROR "profile_model_smoke: tools/profile_model.py did not write ${OUT}")
endif()

set(ENV{CCSIM_PROFILED_TRACE} ${OUT})
execute_process(COMMAND ${TRACES_TEST} --gtest_filter=ProfiledTrace.* RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "profile_model_smoke: the profiled trace does not load or has the wrong shape (exit ${rc})")
endif()
# A skipped test exits 0 too: make sure it ran and passed.
if(out MATCHES "SKIPPED" OR NOT out MATCHES "PASSED  \\] 1 test")
  message(FATAL_ERROR "profile_model_smoke: ProfiledTrace.* did not run")
endif()
