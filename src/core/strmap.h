/* strmap.h — a string -> pointer hash map (strmap.c). */
#ifndef MF_CORE_STRMAP_H
#define MF_CORE_STRMAP_H

#include "core/base.h"

typedef struct mf_strmap mf_strmap;
mf_strmap *mf_strmap_new(void);
void mf_strmap_free(mf_strmap *m);
void **mf_strmap_slot(mf_strmap *m, const char *key, bool create); /* NULL if absent and !create */

#endif
