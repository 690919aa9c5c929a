# PyTorch through Lanes' drop-in libnccl.so.2 (torch_nccl_test.py): 2 and 4
# ranks on GPU 0 with the library preloaded run torch.distributed's NCCL
# backend (collectives, point-to-point, subgroups, DDP) and must get the
# references' results, and every rank must show Lanes' log line.
# Included by tests/compat/CMakeLists.txt.
#
# Not in sanitizer builds: an instrumented library cannot be preloaded into an
# uninstrumented python3.
#
# The interpreter is looked up on PATH when the test runs, not at configure
# time, so the one with PyTorch on the GPU machine is used; set
# LANES_TORCH_PYTHON to a path to pin another. Without torch, or without a
# CUDA device, the script exits 77 and CTest reports the test skipped.
if(NOT LANES_SANITIZE AND TARGET lanes_nccl)
  set(LANES_TORCH_PYTHON "python3" CACHE STRING
      "Python with a CUDA build of PyTorch for the NcclAbi.Torch* tests (a name is looked up on PATH at test time)")
  foreach(nprocs 2 4)
    add_test(NAME NcclAbi.Torch${nprocs}Procs
      COMMAND ${LANES_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/torch_nccl_test.py
              --lib $<TARGET_FILE_DIR:lanes_nccl>/libnccl.so.2
              --nprocs ${nprocs}
              --log-dir ${CMAKE_CURRENT_BINARY_DIR}/torch_${nprocs}procs)
    # RESOURCE_LOCK: like the other multi-process GPU tests, not beside them
    # (GPU memory, /dev/shm staging arenas).
    set_tests_properties(NcclAbi.Torch${nprocs}Procs PROPERTIES
      LABELS gpu
      SKIP_RETURN_CODE 77
      TIMEOUT 900
      RESOURCE_LOCK lanes_gpu_processes)
  endforeach()
endif()
