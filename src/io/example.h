/* example.h — tf.train.Example (example.c); the API is moonflow.h's
 * mf_example_*, which ops/parsing.c reads serialized Examples with. */
#ifndef MF_IO_EXAMPLE_H
#define MF_IO_EXAMPLE_H

#include "core/base.h"

#endif
