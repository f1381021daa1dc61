# libvramscope_intercept.so (the LD_PRELOAD recorder) and its tests against a fake driver/runtime.
# Included from native/CMakeLists.txt; Linux only (LD_PRELOAD, dlsym interposition). Needs no CUDA.
if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  add_library(vramscope_intercept SHARED ${CMAKE_CURRENT_LIST_DIR}/intercept.cpp)
  set_target_properties(vramscope_intercept PROPERTIES CXX_VISIBILITY_PRESET hidden
                                                       VISIBILITY_INLINES_HIDDEN ON)
  # Statically linked C++ runtime: nothing for the preloaded library to disagree with in the
  # program it lands in. No version script: unversioned definitions also interpose on the
  # versioned references of programs linked against libcudart.so.
  target_link_options(vramscope_intercept PRIVATE -static-libstdc++ -static-libgcc)
  target_link_libraries(vramscope_intercept PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(vramscope_intercept PRIVATE -Wall -Wextra)
  endif()

  if(VRAMSCOPE_TESTS AND NOT CMAKE_JS_VERSION)
    set(_vs_fakes ${CMAKE_CURRENT_LIST_DIR}/../tests/intercept)
    add_library(vramscope_fake_cuda SHARED ${_vs_fakes}/fake_cuda_driver.cpp)
    set_target_properties(vramscope_fake_cuda PROPERTIES CXX_VISIBILITY_PRESET hidden)
    add_library(vramscope_fake_cudart SHARED ${_vs_fakes}/fake_cuda_runtime.cpp)
    set_target_properties(vramscope_fake_cudart PROPERTIES CXX_VISIBILITY_PRESET hidden)
    target_compile_definitions(vramscope_fake_cudart PRIVATE
                               FAKE_CUDA_DRIVER="$<TARGET_FILE:vramscope_fake_cuda>")
    target_link_libraries(vramscope_fake_cudart PRIVATE ${CMAKE_DL_LIBS})
    add_executable(intercept_fake_program ${_vs_fakes}/fake_program.cpp)
    target_compile_definitions(intercept_fake_program PRIVATE
                               FAKE_CUDA_DRIVER="$<TARGET_FILE:vramscope_fake_cuda>")
    target_link_libraries(intercept_fake_program PRIVATE vramscope_fake_cudart vramscope_fake_cuda
                                                         ${CMAKE_DL_LIBS} Threads::Threads)
    set(_vs_paths FAKE_PROGRAM="$<TARGET_FILE:intercept_fake_program>"
                  INTERCEPT_LIBRARY="$<TARGET_FILE:vramscope_intercept>")
    add_executable(intercept_test ${_vs_fakes}/intercept_test.cpp)
    target_include_directories(intercept_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../tests)
    target_compile_definitions(intercept_test PRIVATE ${_vs_paths})
    add_dependencies(intercept_test intercept_fake_program vramscope_intercept)
    if(VRAMSCOPE_SANITIZE)
      # A sanitized program cannot take a preloaded library ahead of its runtime ("ASan runtime
      # does not come first"): the interposer is tested in the plain builds only.
      message(STATUS "intercept_test: not run under VRAMSCOPE_SANITIZE=${VRAMSCOPE_SANITIZE} (LD_PRELOAD into a sanitized program)")
    else()
      add_test(NAME intercept_test COMMAND intercept_test)
      set_tests_properties(intercept_test PROPERTIES LABELS "CPU" TIMEOUT 120)
    endif()
    # The overhead benchmark: built here, run by hand and by gpu-record.sh (not a timed test).
    add_executable(vramscope_intercept_bench ${_vs_fakes}/intercept_bench.cpp)
    target_compile_definitions(vramscope_intercept_bench PRIVATE ${_vs_paths})
    add_dependencies(vramscope_intercept_bench intercept_fake_program vramscope_intercept)
  endif()
endif()
