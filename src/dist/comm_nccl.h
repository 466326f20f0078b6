/* The communicator for tensors on a device: NCCL for CUDA (comm_nccl.c, built when CMake
 * finds NCCL), made on first use over the world communicator and ended with it. */
#ifndef OAR_DIST_COMM_NCCL_H
#define OAR_DIST_COMM_NCCL_H

#include "dist/comm.h"

#ifdef OAR_HAVE_NCCL
/* A NCCL communicator with boot's ranks, its ncclUniqueId broadcast over boot. NULL with the
 * error set. */
oar_comm *oar_comm_nccl_new(oar_comm *boot);
#endif

/* device_comm.c: the communicator collectives on dev's tensors use (the world's for the CPU;
 * NCCL for CUDA, made on first use); NULL with an error naming who when there is none. */
oar_comm *oar_dist_device_comm(oar_device dev, const char *who);
/* Ends the device communicators (from oar_dist_finalize; clean: every rank is here). */
void oar_dist_device_comms_end(bool clean);

#endif
