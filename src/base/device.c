/* The device table and the public memory functions, which answer for any device. */
#include "device.h"

#include <string.h>

static oar_memory_stats host_stats(void) { return oar_host_memory_stats(); }
static int host_count(void) { return 1; }
static void *host_alloc(size_t n) { return oar_alloc(n); }
static void host_free(void *p, size_t n) { oar_free(p, n); }
static oar_status host_copy(void *dst, const void *src, size_t n, oar_copy_kind kind) {
    (void)kind;
    if (n) memcpy(dst, src, n);
    return OAR_OK;
}

static const oar_device_ops host_ops = {
    .name = "cpu",
    .count = host_count,
    .alloc = host_alloc,
    .free = host_free,
    .stats = host_stats,
    .reset_peak = oar_host_memory_reset_peak,
    .empty_cache = oar_host_memory_empty_cache,
    .set_limit = oar_host_memory_set_limit,
    .copy = host_copy,
};

static const oar_device_ops *g_devices[OAR_DEVICE_COUNT] = {&host_ops};

void oar_device_register(oar_device dev, const oar_device_ops *ops) {
    if ((int)dev > 0 && (int)dev < OAR_DEVICE_COUNT) g_devices[dev] = ops;
}

const char *oar_device_name(oar_device dev) {
    switch (dev) {
    case OAR_CPU: return "cpu";
    case OAR_CUDA: return "cuda";
    }
    return "unknown";
}

const oar_device_ops *oar_device_use(oar_device dev, const char *who) {
    oar_init();
    if ((int)dev < 0 || (int)dev >= OAR_DEVICE_COUNT) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected a device (OAR_CPU or OAR_CUDA), got %d", who, (int)dev);
        return NULL;
    }
    const oar_device_ops *ops = g_devices[dev];
    if (!ops) {
        oar_error(OAR_ERR_UNSUPPORTED, "%s: this build of oar has no %s support; rebuild with the CUDA toolkit "
                                       "installed (cmake -DOAR_WITH_CUDA=ON)", who, oar_device_name(dev));
        return NULL;
    }
    if (ops->count() < 1) {
        oar_error(OAR_ERR_UNSUPPORTED, "%s: no %s device is present on this machine (oar was built with %s "
                                       "support; `oar info` shows what it found)", who, ops->name, ops->name);
        return NULL;
    }
    return ops;
}

const oar_device_ops *oar_device_get(oar_device dev) {
    const oar_device_ops *ops = (int)dev >= 0 && (int)dev < OAR_DEVICE_COUNT ? g_devices[dev] : NULL;
    return ops && ops->count() > 0 ? ops : NULL;
}

void *oar_device_stream(oar_device dev) {
    const oar_device_ops *ops = (int)dev > 0 && (int)dev < OAR_DEVICE_COUNT ? g_devices[dev] : NULL;
    return ops && ops->stream ? ops->stream() : NULL;
}

oar_memory_stats oar_memory_stats_get(oar_device dev) {
    oar_memory_stats s = {0};
    const oar_device_ops *ops = (int)dev >= 0 && (int)dev < OAR_DEVICE_COUNT ? g_devices[dev] : NULL;
    if (!ops || ops->count() < 1) return s;
    s = ops->stats();
    s.reserved_bytes = s.current_bytes + s.cached_bytes;
    s.fragmentation = s.reserved_bytes ? (double)s.cached_bytes / (double)s.reserved_bytes : 0.0;
    return s;
}

void oar_memory_reset_peak(oar_device dev) {
    const oar_device_ops *ops = oar_device_use(dev, "oar_memory_reset_peak");
    if (ops) ops->reset_peak();
}

void oar_memory_empty_cache(oar_device dev) {
    const oar_device_ops *ops = oar_device_use(dev, "oar_memory_empty_cache");
    if (ops) ops->empty_cache();
}

oar_status oar_memory_set_limit(oar_device dev, int64_t bytes) {
    const oar_device_ops *ops = oar_device_use(dev, "oar_memory_set_limit");
    if (!ops) return oar_last_status();
    if (bytes < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "oar_memory_set_limit: expected a limit >= 0 bytes (0: none), got %lld",
                         (long long)bytes);
    return ops->set_limit(bytes);
}

bool oar_cuda_is_available(void) {
    oar_init();
    return g_devices[OAR_CUDA] && g_devices[OAR_CUDA]->count() > 0;
}

int oar_cuda_device_count(void) {
    oar_init();
    return g_devices[OAR_CUDA] ? g_devices[OAR_CUDA]->count() : 0;
}

bool oar_cuda_is_built(void) {
    oar_init();
    return g_devices[OAR_CUDA] != NULL;
}

oar_status oar_synchronize(oar_device dev) {
    const oar_device_ops *ops = oar_device_use(dev, "oar_synchronize");
    if (!ops) return oar_last_status();
    return ops->synchronize ? ops->synchronize() : OAR_OK;
}

/* Read by the CUDA GEMM kernels at each call; kept here so every build has the switch. */
static bool g_allow_tf32;
void oar_cuda_set_allow_tf32(bool allow) { __atomic_store_n(&g_allow_tf32, allow, __ATOMIC_RELAXED); }
bool oar_cuda_get_allow_tf32(void) { return __atomic_load_n(&g_allow_tf32, __ATOMIC_RELAXED); }
