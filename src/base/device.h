/* Devices behind one interface: each device's allocator, copies and stream. The CPU entry
 * is built in; the CUDA backend registers its own from its init function (nothing is
 * registered in a build without CUDA, and every call on such a device fails with a message
 * saying so). Layers above reach device memory only through this table. */
#ifndef OAR_DEVICE_H
#define OAR_DEVICE_H

#include "base.h"

#define OAR_DEVICE_COUNT 2

typedef enum oar_copy_kind { OAR_COPY_TO_DEVICE, OAR_COPY_TO_HOST, OAR_COPY_ON_DEVICE } oar_copy_kind;

/* A strided copy between two buffers of one device, converting dtypes: the shape, and each
 * side's element strides, dtype and first element. */
typedef struct oar_copy_desc {
    int ndim;
    int64_t shape[OAR_MAX_DIMS];
    int64_t dst_strides[OAR_MAX_DIMS], src_strides[OAR_MAX_DIMS];
    oar_dtype dst_dtype, src_dtype;
    void *dst;
    const void *src;
} oar_copy_desc;

typedef struct oar_device_ops {
    const char *name;                               /* "cpu", "cuda" */
    int (*count)(void);                             /* devices present; 0: built, none found */
    void *(*alloc)(size_t nbytes);                  /* NULL with OAR_ERR_OOM set */
    void (*free)(void *p, size_t nbytes);
    oar_memory_stats (*stats)(void);
    void (*reset_peak)(void);
    void (*empty_cache)(void);
    oar_status (*set_limit)(int64_t bytes);
    /* n bytes between the host and this device, ordered on the current stream; a copy to
     * the host returns when the bytes are there */
    oar_status (*copy)(void *dst, const void *src, size_t n, oar_copy_kind kind);
    oar_status (*copy_strided)(const oar_copy_desc *d);
    oar_status (*fill)(void *dst, oar_dtype dt, int64_t n, double v);
    void *(*stream)(void);                          /* the current stream, for kernel contexts */
    oar_status (*synchronize)(void);
    /* Graphs of recorded work (NULL where the device has none: the CPU). graph_begin starts
     * recording the current stream's launches instead of running them; memory freed while
     * recording is kept for the graph (its replays write there). graph_end stops: with keep,
     * it returns the graph ready to launch, else (or when recording failed) it discards it
     * and returns NULL with the error set when recording failed. */
    oar_status (*graph_begin)(void);
    void *(*graph_end)(bool keep);
    oar_status (*graph_launch)(void *graph);
    void (*graph_free)(void *graph);
    /* The profiler's device timeline (NULL where the device has none). timeline_reset drops
     * the earlier marks and records a new base, waiting for it; mark records a point on the
     * current stream without waiting and returns its id (> 0; 0 when none was recorded);
     * mark_ns waits for mark `to` and returns the ns from mark `from` to it (from 0: the
     * base), -1 when unknown. */
    oar_status (*timeline_reset)(void);
    int32_t (*mark)(void);
    int64_t (*mark_ns)(int32_t from, int32_t to);
} oar_device_ops;

void oar_device_register(oar_device dev, const oar_device_ops *ops);
/* The device's table, or NULL with an error naming who asked when the build has no such
 * device or the machine has none. */
const oar_device_ops *oar_device_use(oar_device dev, const char *who);
const char *oar_device_name(oar_device dev);
/* The device's table, or NULL (quietly) when the build or the machine has none. */
const oar_device_ops *oar_device_get(oar_device dev);
/* The current stream of dev (NULL on the CPU). */
void *oar_device_stream(oar_device dev);

/* The host allocator's side of the table (alloc.c). */
oar_memory_stats oar_host_memory_stats(void);
void oar_host_memory_reset_peak(void);
void oar_host_memory_empty_cache(void);
oar_status oar_host_memory_set_limit(int64_t bytes);

#endif
