/* base.h — what every engine file shares: the public API and two macros. */
#ifndef MF_CORE_BASE_H
#define MF_CORE_BASE_H

#include "moonflow.h"

#define MF_UNUSED(x) ((void)(x))
#define MF_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#if defined(__GNUC__)
#define MF_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MF_PRINTF(a, b)
#endif

#endif
