# Helpers shared by every folder's CMakeLists.txt.

# Warnings for the project's own code; third-party headers come in as SYSTEM includes.
set(CCSIM_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wconversion -Wno-sign-conversion)
# GCC 12 reports a false -Warray-bounds inside nlohmann::json's set_parents() (JSON_DIAGNOSTICS)
# when it is inlined into our code; GCC 13 no longer does. The code it points at is not ours.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  list(APPEND CCSIM_WARNINGS -Wno-array-bounds)
endif()

function(ccsim_target_defaults target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${CCSIM_WARNINGS}>)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --Werror all-warnings>)
  target_compile_definitions(${target} PRIVATE JSON_DIAGNOSTICS=1)
  # fmt 9 disables its constexpr format checks under nvcc unless told otherwise.
  target_compile_definitions(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:FMT_USE_CONSTEXPR=1>)
  if(CCSIM_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${CCSIM_SANITIZE} -fno-omit-frame-pointer
                                              -fno-sanitize-recover=all)
    target_link_options(${target} PRIVATE -fsanitize=${CCSIM_SANITIZE})
  endif()
  if(CCSIM_FUZZ)
    # Coverage for libFuzzer in every object (tests/fuzz links the fuzzer's main itself).
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
  endif()
endfunction()

# ccsim_add_library(NAME <name> SRCS <files...> DEPS <targets...>)
function(ccsim_add_library)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  add_library(${ARG_NAME} STATIC ${ARG_SRCS})
  target_include_directories(${ARG_NAME} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${ARG_NAME} PUBLIC ${ARG_DEPS})
  ccsim_target_defaults(${ARG_NAME})
endfunction()

# ccsim_add_test(NAME <name> SRCS <files...> DEPS <targets...> LABELS <labels...>)
function(ccsim_add_test)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  ccsim_target_defaults(${ARG_NAME})
  # gtest_discover_tests (CMake 3.25) keeps only the first value of a list property, so the labels
  # are set by a second include file that runs after discovery, over the discovered test list.
  gtest_discover_tests(${ARG_NAME} DISCOVERY_TIMEOUT 60 TEST_LIST ${ARG_NAME}_TESTS
                       WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set(label_file ${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}_labels.cmake)
  file(WRITE ${label_file}
       "if(${ARG_NAME}_TESTS)\n  set_tests_properties(\${${ARG_NAME}_TESTS} PROPERTIES LABELS \"${ARG_LABELS}\")\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${label_file})
endfunction()
