/* Internal pieces shared by the files of src/amp. */
#ifndef OAR_AMP_INTERNAL_H
#define OAR_AMP_INTERNAL_H

#include "base/base.h"

/* Registers the f32 masters (masters_in) or the low parameters again under the parameters'
 * names in m (checkpoint.c saves and loads the masters this way). */
oar_status oar_amp_masters_swap(oar_amp_masters *w, oar_module *m, bool masters_in);

#endif
