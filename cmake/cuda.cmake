# CUDA data path: reduction/copy kernels (kernels/cuda), their GPU tests (tests/gpu)
# and the kernel bandwidth tool (bench/gpu). Included from the top-level CMakeLists.txt
# before the tools/bench/tests subdirectories; builds nothing when nvcc is absent.

include(CheckLanguage)

# nvcc is often installed outside PATH; look in the toolkit's usual home before
# deciding there is no CUDA (an explicit CMAKE_CUDA_COMPILER or CUDACXX wins).
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(LANES_NVCC nvcc)
  if(NOT LANES_NVCC AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
endif()
check_language(CUDA)

if(CMAKE_CUDA_COMPILER)
  set(LANES_CUDA_DEFAULT ON)
else()
  set(LANES_CUDA_DEFAULT OFF)
endif()
option(LANES_ENABLE_CUDA "Build the CUDA data path (needs nvcc)" ${LANES_CUDA_DEFAULT})
if(NOT LANES_ENABLE_CUDA)
  message(STATUS "Lanes: CUDA data path disabled (LANES_ENABLE_CUDA=OFF or nvcc not found)")
  return()
endif()

# Machine code for every architecture Lanes supports, plus PTX of the newest for
# later GPUs. sm_80's code also runs on sm_86 (RTX 30xx), which has no instruction
# the kernels would use, so it gets none of its own; sm_89 (RTX 40xx) converts
# float8 in hardware. Set it before enable_language(CUDA), which would otherwise fill
# in nvcc's default; a -DCMAKE_CUDA_ARCHITECTURES=... given by the user is defined
# already and kept.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "80-real;89-real;90-real;120-real;120-virtual"
      CACHE STRING "CUDA architectures to build the kernels for")
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
if(CUDAToolkit_VERSION VERSION_LESS 12.1)
  message(FATAL_ERROR "Lanes needs CUDA 12.1 or newer (found ${CUDAToolkit_VERSION}): the LL "
                      "send/recv kernel takes up to 32 KiB of kernel parameters")
endif()
# CMake 3.25 knows no C++20 dialect flag for nvcc; the kernels need only C++17.
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)
message(STATUS "Lanes: CUDA ${CUDAToolkit_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")

# The top-level add_compile_options() flags are host-compiler flags that nvcc does not
# accept; targets built here replace them with per-language equivalents.
function(lanes_cuda_target_flags target)
  set_property(TARGET ${target} PROPERTY COMPILE_OPTIONS "")
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
endfunction()

file(GLOB LANES_CUDA_KERNEL_SOURCES CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_LIST_DIR}/../kernels/cuda/*.cu)
add_library(lanes_cuda_kernels STATIC ${LANES_CUDA_KERNEL_SOURCES})
lanes_cuda_target_flags(lanes_cuda_kernels)
set_target_properties(lanes_cuda_kernels PROPERTIES
  POSITION_INDEPENDENT_CODE ON
  CUDA_SEPARABLE_COMPILATION OFF)
target_include_directories(lanes_cuda_kernels
  PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
         $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/src>
         $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}>)
target_compile_definitions(lanes_cuda_kernels PUBLIC LANES_HAVE_CUDA=1)
# Bit-exact agreement with the CPU reductions (docs/kernels.md): no FMA contraction,
# no flush-to-zero, IEEE division (the kernels also use explicit _rn intrinsics).
# Hidden visibility as lanes_objects: linked into liblanes.so, only the C API is exported.
target_compile_options(lanes_cuda_kernels PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--fmad=false --ftz=false --prec-div=true --prec-sqrt=true
                             -Xcompiler=-fvisibility=hidden>)
target_link_libraries(lanes_cuda_kernels PUBLIC CUDA::cudart_static)

if(LANES_BUILD_TESTS AND EXISTS ${CMAKE_SOURCE_DIR}/tests/gpu/CMakeLists.txt)
  # The top level calls enable_testing() after this file; a directory only gets a
  # CTestTestfile if testing is on when it is added, so switch it on here.
  enable_testing()
  add_subdirectory(${CMAKE_SOURCE_DIR}/tests/gpu ${CMAKE_BINARY_DIR}/tests/gpu)
endif()
if(LANES_BUILD_BENCH AND EXISTS ${CMAKE_SOURCE_DIR}/bench/gpu/reduce_bandwidth.cu)
  add_executable(lanes_reduce_bandwidth ${CMAKE_SOURCE_DIR}/bench/gpu/reduce_bandwidth.cu)
  lanes_cuda_target_flags(lanes_reduce_bandwidth)
  target_link_libraries(lanes_reduce_bandwidth PRIVATE lanes_cuda_kernels)
endif()
if(LANES_BUILD_BENCH AND EXISTS ${CMAKE_SOURCE_DIR}/bench/gpu/mapped_rate.cu)
  add_executable(lanes_mapped_rate ${CMAKE_SOURCE_DIR}/bench/gpu/mapped_rate.cu)
  lanes_cuda_target_flags(lanes_mapped_rate)
  target_link_libraries(lanes_mapped_rate PRIVATE CUDA::cudart_static)
endif()

# Perf tools on device memory (bench/perf, docs/benchmarks.md). lanes_perf_common is made
# by bench/CMakeLists.txt, added after this file: once the top-level directory is
# processed, compile its CUDA half (LANES_PERF_CUDA) and link the runtime it calls.
function(lanes_perf_enable_cuda)
  if(TARGET lanes_perf_common)
    target_compile_definitions(lanes_perf_common PUBLIC LANES_PERF_CUDA=1)
    target_link_libraries(lanes_perf_common PUBLIC CUDA::cudart_static)
  endif()
  # GPU benchmarks over the perf driver's pieces (copy bounds, device memory).
  if(TARGET lanes_perf_common AND EXISTS ${CMAKE_SOURCE_DIR}/bench/gpu/allreduce_bound.cc)
    add_executable(lanes_allreduce_bound ${CMAKE_SOURCE_DIR}/bench/gpu/allreduce_bound.cc)
    target_link_libraries(lanes_allreduce_bound PRIVATE lanes_perf_common)
  endif()
  if(TARGET CUDA::cublas AND TARGET lanes_perf_common
     AND EXISTS ${CMAKE_SOURCE_DIR}/bench/gpu/overlap_gemm.cu)
    # The .cu uses the C API only (nvcc compiles C++17; the perf driver's headers are
    # C++20): its Lanes/NCCL backends, flags and report are C++20 .cc files beside it.
    file(GLOB LANES_OVERLAP_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/bench/gpu/overlap_*.cc)
    add_executable(lanes_overlap_gemm ${CMAKE_SOURCE_DIR}/bench/gpu/overlap_gemm.cu
                                      ${LANES_OVERLAP_SOURCES})
    lanes_cuda_target_flags(lanes_overlap_gemm)
    target_link_libraries(lanes_overlap_gemm PRIVATE lanes_perf_common CUDA::cublas)
  endif()
endfunction()
if(LANES_BUILD_BENCH)
  cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL lanes_perf_enable_cuda)
endif()
