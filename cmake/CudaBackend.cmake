# Decides whether the CUDA runtime backend is built (PARPLAN_WITH_CUDA=AUTO|ON|OFF).
# NCCL ships no CMake package: it is searched next to the toolkit's libraries, NCCL_HOME first.
set(PARPLAN_HAVE_CUDA OFF)
set(PARPLAN_CUDA_SUMMARY "off (PARPLAN_WITH_CUDA=OFF)")
if(NOT PARPLAN_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  set(_nccl_hints $ENV{NCCL_HOME} ${NCCL_HOME})
  if(CUDAToolkit_FOUND)
    list(APPEND _nccl_hints ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_LIBRARY_DIR}/.. "${CUDAToolkit_BIN_DIR}/..")
  endif()
  find_path(PARPLAN_NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
  find_library(PARPLAN_NCCL_LIBRARY nccl HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64)
  if(CUDAToolkit_FOUND AND PARPLAN_NCCL_INCLUDE_DIR AND PARPLAN_NCCL_LIBRARY)
    set(PARPLAN_HAVE_CUDA ON)
    # The CUDA backend is a dlopen'ed module that links the runtime's static libraries: they must be PIC. Without
    # semantic interposition the executable's code keeps the same inlining as a PIE build.
    set(CMAKE_POSITION_INDEPENDENT_CODE ON)
    target_compile_options(parplan_flags INTERFACE -fno-semantic-interposition)
    set(PARPLAN_CUDA_SUMMARY "on (CUDA ${CUDAToolkit_VERSION}, NCCL ${PARPLAN_NCCL_LIBRARY})")
  elseif(PARPLAN_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PARPLAN_WITH_CUDA=ON but CUDAToolkit (${CUDAToolkit_FOUND}) or NCCL "
                        "(include: ${PARPLAN_NCCL_INCLUDE_DIR}, lib: ${PARPLAN_NCCL_LIBRARY}) was not found; set NCCL_HOME")
  else()
    set(PARPLAN_CUDA_SUMMARY "off (AUTO: CUDAToolkit or NCCL not found)")
  endif()
endif()
