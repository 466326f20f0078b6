/* Which communicator a collective on a tensor uses: the world's (MPI or local) for host
 * tensors, NCCL for GPU tensors, made over the world on first use. */
#include "dist/comm_nccl.h"

#include "base/device.h"

#include <stdlib.h>

static oar_comm *g_cuda_comm;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

oar_comm *oar_dist_device_comm(oar_device dev, const char *who) {
    oar_comm *world = oar_dist_world_comm();
    if (!world) {
        oar_error(OAR_ERR_STATE, "%s: distributed state not started; call oar_dist_init first", who);
        return NULL;
    }
    if (dev == OAR_CPU) return world;
#ifdef OAR_HAVE_NCCL
    pthread_mutex_lock(&g_mu);
    if (!g_cuda_comm) g_cuda_comm = oar_comm_nccl_new(world);
    oar_comm *c = g_cuda_comm;
    pthread_mutex_unlock(&g_mu);
    return c;
#else
    oar_error(OAR_ERR_UNSUPPORTED, "%s: collectives on %s tensors need NCCL, and this oar was built without it "
                                   "(cmake reports NCCL: found when the library and nccl.h are installed); copy "
                                   "the tensor to the host with oar_to(t, OAR_CPU) first", who, oar_device_name(dev));
    return NULL;
#endif
}

void oar_dist_device_comms_end(bool clean) {
    pthread_mutex_lock(&g_mu);
    oar_comm *c = g_cuda_comm;
    g_cuda_comm = NULL;
    pthread_mutex_unlock(&g_mu);
    if (!c) return;
    c->ops->shutdown(c, clean);
    if (clean) {
        free(c->impl);
        free(c);
    }
}
