# ctest train_gpt_smoke (cmake -P): tools/gradients/train_gpt.py on a tiny model, three ways.
#  1. Twice without pretraining: the two dumps are byte-identical (the script's determinism claim).
#  2. With --pretrain-corpus/--pretrain-steps: the manifest records the pretraining, and the dumped
#     gradients differ from the plain run's at every dumped step (the pretrained weights are used).
#  3. --pretrain-steps without --pretrain-corpus is refused with exit 2 and writes nothing.
# Every dump written is then loaded by `ccsim vnmse`, so the writer and the C++ reader stay in step.
#  4. With --scheme dynamiq: the workers' gradients go through ccsim.torch.SimulatedDDP; the run
#     reports its rounds and its dump is read back too.
# Variables: PYTHON (an interpreter with PyTorch), SOURCE_DIR, CCSIM, OUT (a scratch directory),
# PYTHONPATH (where the build put the ccsim package).
foreach(var PYTHON SOURCE_DIR CCSIM OUT PYTHONPATH)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "train_gpt_smoke: -D${var}=... is required")
  endif()
endforeach()

set(licenses /usr/share/common-licenses)
set(tiny --corpus ${licenses}/Apache-2.0 --tokenizer char --d-model 16 --layers 1 --heads 2 --block-size 16
         --shard-chunk 64 --workers 2 --micro-batch 2 --dump-steps 0 2 --dtype F32)
file(REMOVE_RECURSE ${OUT})
set(ENV{PYTHONPATH} ${PYTHONPATH})

function(train name)
  execute_process(COMMAND ${PYTHON} ${SOURCE_DIR}/tools/gradients/train_gpt.py ${tiny} ${ARGN} --out ${OUT}/${name}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "train_gpt_smoke: train_gpt.py (${name}) failed (exit ${rc}):\n${out}")
  endif()
  execute_process(COMMAND ${CCSIM} vnmse --gradients ${OUT}/${name} --algo dynamiq --csv -
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "2 workers")
    message(FATAL_ERROR "train_gpt_smoke: ccsim vnmse cannot read the ${name} dump (exit ${rc}):\n${out}")
  endif()
endfunction()

train(plain)
train(plain_again)
train(pretrained --pretrain-corpus ${licenses}/GPL-3 --pretrain-steps 3 --pretrain-batch 2)
train(compressed --scheme dynamiq --param budget=4 --log-every 1)

foreach(w 0 1)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT}/plain/worker${w}.safetensors
                          ${OUT}/plain_again/worker${w}.safetensors RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "train_gpt_smoke: two identical runs wrote different worker${w}.safetensors")
  endif()
endforeach()

# The same layout, different gradients: compare each dumped step's tensor bytes (F32, layers flattened).
file(READ ${OUT}/plain/manifest.json plain_manifest)
file(READ ${OUT}/pretrained/manifest.json pre_manifest)
string(JSON plain_elements GET "${plain_manifest}" elements)
string(JSON pre_elements GET "${pre_manifest}" elements)
if(NOT plain_elements EQUAL pre_elements)
  message(FATAL_ERROR "train_gpt_smoke: pretraining changed the model size (${plain_elements} -> ${pre_elements})")
endif()
string(JSON steps GET "${pre_manifest}" provenance pretraining steps)
string(JSON corpus GET "${pre_manifest}" provenance pretraining corpus)
if(NOT steps EQUAL 3 OR NOT corpus MATCHES "GPL-3$")
  message(FATAL_ERROR "train_gpt_smoke: provenance.pretraining is ${steps} steps on '${corpus}', expected 3 on GPL-3")
endif()
string(JSON has_pre ERROR_VARIABLE missing GET "${plain_manifest}" provenance pretraining)
if(NOT missing)
  message(FATAL_ERROR "train_gpt_smoke: a run without pretraining records provenance.pretraining")
endif()
# The two dumped steps are the two F32 tensors that end each worker file, in step order.
math(EXPR step_hex_len "${plain_elements} * 4 * 2")  # hex digits of one step's tensor
function(step_hex path index out)
  file(READ ${path} hex HEX)
  string(LENGTH "${hex}" len)
  math(EXPR at "${len} - (2 - ${index}) * ${step_hex_len}")
  string(SUBSTRING "${hex}" ${at} ${step_hex_len} part)
  set(${out} "${part}" PARENT_SCOPE)
endfunction()
foreach(w 0 1)
  foreach(index 0 1)
    step_hex(${OUT}/plain/worker${w}.safetensors ${index} a)
    step_hex(${OUT}/pretrained/worker${w}.safetensors ${index} b)
    if(a STREQUAL b)
      message(FATAL_ERROR "train_gpt_smoke: worker${w}'s gradient at dumped step index ${index} is the same with "
                          "and without pretraining")
    endif()
  endforeach()
endforeach()

# Compression changes the updates, not the first gradient: step 0's local gradients are the plain
# run's, step 2's are not (the weights they are taken at moved differently).
foreach(w 0 1)
  step_hex(${OUT}/plain/worker${w}.safetensors 0 a)
  step_hex(${OUT}/compressed/worker${w}.safetensors 0 b)
  if(NOT a STREQUAL b)
    message(FATAL_ERROR "train_gpt_smoke: --scheme changed worker${w}'s gradient at step 0")
  endif()
  step_hex(${OUT}/plain/worker${w}.safetensors 1 a)
  step_hex(${OUT}/compressed/worker${w}.safetensors 1 b)
  if(a STREQUAL b)
    message(FATAL_ERROR "train_gpt_smoke: worker${w}'s gradient at step 2 is the same with and without --scheme")
  endif()
endforeach()

execute_process(COMMAND ${PYTHON} ${SOURCE_DIR}/tools/gradients/train_gpt.py ${tiny} --pretrain-steps 3
                        --out ${OUT}/refused
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 2 OR NOT out MATCHES "--pretrain-corpus" OR EXISTS ${OUT}/refused)
  message(FATAL_ERROR "train_gpt_smoke: --pretrain-steps without --pretrain-corpus: exit ${rc}, expected 2 and "
                      "nothing written:\n${out}")
endif()
message("train_gpt_smoke: deterministic, pretraining recorded and used, --scheme synchronizes through ccsim, bad options refused")
