/* The profiler on devices (issue 19): each op's kernel time on the device's own timeline,
 * measured by events recorded on the device's stream around the kernel (CUDA), recorded by
 * full runs and resolved lazily, when a table, summary or trace is asked for (recording
 * never waits for the GPU). The op and kernel tables keep the host side of the same calls.
 * docs/profiler.md, "GPU spans". */
#ifndef OAR_PROFILER_DEVICE_H
#define OAR_PROFILER_DEVICE_H

#include "oar.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rows of the device table: one per (op, device); impl is the device ("cuda"); total, avg,
 * min and max are seconds on the device's timeline; gflops_per_s uses them. Waits for the
 * recorded work to finish. 0 rows when no op ran on a device with a timeline. */
OAR_API int oar_profiler_device_op_count(void);
OAR_API oar_status oar_profiler_device_op_at(oar_profiler_sort sort, int i, oar_profiler_op_row *out);
OAR_API oar_status oar_profiler_device_op_find(const char *name, oar_profiler_op_row *out);

#ifdef __cplusplus
}
#endif

#endif
