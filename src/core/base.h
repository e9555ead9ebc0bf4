/* base.h — what every engine file shares: the public API (with MF_PRINTF) and two macros. */
#ifndef MF_CORE_BASE_H
#define MF_CORE_BASE_H

#include "moonflow.h"

#define MF_UNUSED(x) ((void)(x))
#define MF_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
