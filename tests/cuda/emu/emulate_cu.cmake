# Makes a host C++ file of a .cu for the CUDA emulation (cuda_emu.h): cmake -DIN=x.cu -DOUT=x.cpp -P
# emulate_cu.cmake. Launch configurations (<<<...>>>) go, so each launch is a plain call; the
# emulation header replaces cuda_types.cuh and CUB; the shared-memory declaration goes (the
# header defines the array).
file(READ ${IN} src)
string(REPLACE "#include \"cuda_types.cuh\"" "#include \"cuda_emu.h\"" src "${src}")
string(REPLACE "#include <cub/device/device_radix_sort.cuh>" "" src "${src}")
string(REGEX REPLACE "<<<[^;]*>>>" "" src "${src}")
string(REGEX REPLACE "extern __shared__ [^;]*;" "" src "${src}")
if(src MATCHES "<<<|__shared__")
  message(FATAL_ERROR "emulate_cu: ${IN} has launches or shared memory this script does not handle")
endif()
file(WRITE ${OUT} "// generated from ${IN} by emulate_cu.cmake: do not edit\n${src}")
