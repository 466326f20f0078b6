/* Compiled programs on the GPU replayed as CUDA graphs: from its second run, a program on the
 * GPU records its instruction list as CUDA graphs and replays them, one launch per graph; what
 * cannot be recorded (random draws, ops that read results back or read host inputs when
 * launched) runs as plain launches between them. docs/cuda.md, "Compiled programs and CUDA
 * graphs". Included by oar.h. */
#ifndef OAR_CUDA_GRAPHS_H
#define OAR_CUDA_GRAPHS_H

#include "oar.h"

#ifdef __cplusplus
extern "C" {
#endif

/* On by default where the build has CUDA; the environment variable OAR_CUDA_GRAPHS=0 starts
 * it off. Switching on in a build without CUDA fails with a message (switching off never
 * fails). Programs already recorded keep their graphs but stop replaying them while off. */
OAR_API oar_status oar_cuda_graphs_set_enabled(bool on);
OAR_API bool oar_cuda_graphs_enabled(void);

/* For program i of a compiled function (its newest executor): the number of CUDA graphs it
 * replays (-1 when i is out of range), and a line saying what runs as plain launches and why. */
OAR_API int oar_jit_cuda_graph_count(const oar_jit *f, int i);
OAR_API const char *oar_jit_cuda_graph_note(const oar_jit *f, int i);

/* A predictor (oar_predictor_create) whose program runs on device: its weights are copied
 * there once; inputs may be host or device tensors (copied into the program's input slots);
 * outputs are on the device. On the GPU its runs replay CUDA graphs like compiled functions. */
OAR_API oar_predictor *oar_predictor_create_on(const oar_predictor_config *config, oar_device device);

#ifdef __cplusplus
}
#endif
#endif
