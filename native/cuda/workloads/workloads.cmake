# The built-in GPU workloads (native/cuda/workloads/), part of the CUDA library (vramscope_cuda)
# where CUDA is built, and the command-line runner the GPU scripts use. Included from
# native/CMakeLists.txt.
if(VRAMSCOPE_WITH_CUDA)
  target_sources(vramscope_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/workload_context.cu
                                        ${CMAKE_CURRENT_LIST_DIR}/workloads.cu)
  if(NOT CMAKE_JS_VERSION)
    add_executable(vramscope_workload ${CMAKE_CURRENT_LIST_DIR}/workload_main.cpp)
    vramscope_link_cuda(vramscope_workload)
  endif()
endif()
