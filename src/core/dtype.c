/* dtype.c — element types: sizes, names and generic element access. */
#include "core/dtype.h"

#include <string.h>

size_t mf_abi_sizeof(const char *type_name) {
  if (strcmp(type_name, "mf_shape") == 0) return sizeof(mf_shape);
  if (strcmp(type_name, "mf_output") == 0) return sizeof(mf_output);
  if (strcmp(type_name, "mf_session_config") == 0) return sizeof(mf_session_config);
  if (strcmp(type_name, "mf_device_stats") == 0) return sizeof(mf_device_stats);
  if (strcmp(type_name, "mf_tstring") == 0) return sizeof(mf_tstring);
  return 0;
}

const char *mf_version(void) { return MF_VERSION; }

size_t mf_dtype_size(mf_dtype t) {
  switch (t) {
    case MF_FLOAT32: return 4;
    case MF_FLOAT64: return 8;
    case MF_INT32: return 4;
    case MF_INT64: return 8;
    case MF_BOOL: return 1;
    case MF_UINT8: return 1;
    case MF_STRING: return sizeof(mf_tstring);
    case MF_COMPLEX64: return 8;
    case MF_COMPLEX128: return 16;
  }
  return 0;
}

const char *mf_dtype_name(mf_dtype t) {
  switch (t) {
    case MF_FLOAT32: return "float32";
    case MF_FLOAT64: return "float64";
    case MF_INT32: return "int32";
    case MF_INT64: return "int64";
    case MF_BOOL: return "bool";
    case MF_UINT8: return "uint8";
    case MF_STRING: return "string";
    case MF_COMPLEX64: return "complex64";
    case MF_COMPLEX128: return "complex128";
  }
  return "invalid";
}

double mf_load_double(const void *data, mf_dtype t, int64_t i) {
  switch (t) {
#define LOAD(code, type) case code: return (double)((const type *)data)[i];
    MF_FOR_ALL_TYPES(LOAD)
    MF_FOR_COMPLEX_TYPES(LOAD)
#undef LOAD
    case MF_STRING: break;
  }
  return 0;
}

int64_t mf_load_int64(const void *data, mf_dtype t, int64_t i) {
  switch (t) {
#define LOAD(code, type) case code: return (int64_t)((const type *)data)[i];
    MF_FOR_ALL_TYPES(LOAD)
    MF_FOR_COMPLEX_TYPES(LOAD)
#undef LOAD
    case MF_STRING: break;
  }
  return 0;
}

void mf_store_double(void *data, mf_dtype t, int64_t i, double v) {
  switch (t) {
#define STORE(code, type) case code: ((type *)data)[i] = (type)v; break;
    MF_FOR_ALL_TYPES(STORE)
    MF_FOR_COMPLEX_TYPES(STORE)
#undef STORE
    case MF_STRING: break;
  }
}
