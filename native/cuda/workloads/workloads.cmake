# The built-in GPU workloads (native/cuda/workloads/), part of the core library where CUDA is built,
# and the command-line runner the GPU scripts use. Included from native/CMakeLists.txt.
if(VRAMSCOPE_WITH_CUDA)
  target_sources(vramscope_core PRIVATE ${CMAKE_CURRENT_LIST_DIR}/workload_context.cu
                                        ${CMAKE_CURRENT_LIST_DIR}/workloads.cu)
  if(NOT CMAKE_JS_VERSION)
    add_executable(vramscope_workload ${CMAKE_CURRENT_LIST_DIR}/workload_main.cpp)
    vramscope_link_core(vramscope_workload)
  endif()
endif()
