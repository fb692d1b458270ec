// Internal: which device passes compile the Hopper (sm_90a) kernel bodies and PTX wrappers. The
// host pass and sm_90a do; any other device target (such as the compute_90 PTX that nvcc
// -arch=sm_90a also embeds) gets none of the wrappers, and a kernel compiled there traps (the host
// checks the compute capability before it launches one).
#pragma once

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TILEOPS_SM90A_BODY 1
#else
#define TILEOPS_SM90A_BODY 0
#endif
