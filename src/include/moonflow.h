/* moonflow.h — the public C API of moonflow, a symbolic tensor graph engine.
 *
 * Handles are opaque. Every fallible call takes an mf_status* and returns an
 * mf_code (or NULL); nothing aborts on user error. Ownership is written beside
 * each declaration: "new reference" means the caller must release it.
 *
 * The block between MF_CDEF_BEGIN and MF_CDEF_END is turned into LuaJIT FFI
 * declarations by tools/gencdef.sh: keep it free of preprocessor directives.
 */
#ifndef MOONFLOW_H
#define MOONFLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The library's version; mf_version() gives the one the loaded library was built as. */
#define MF_VERSION "0.1.0"

/* What the library exports: the functions declared here, and nothing else
 * (it is built with -fvisibility=hidden). A Windows DLL is built with
 * MF_BUILD_DLL defined; hosts of a DLL define MF_USE_DLL. */
#if defined(_WIN32) && defined(MF_BUILD_DLL)
#define MF_API __declspec(dllexport)
#elif defined(_WIN32) && defined(MF_USE_DLL)
#define MF_API __declspec(dllimport)
#elif defined(__GNUC__)
#define MF_API __attribute__((visibility("default")))
#else
#define MF_API
#endif

/* printf-style format checks of the declarations below. */
#if defined(__GNUC__)
#define MF_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MF_PRINTF(a, b)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* MF_CDEF_BEGIN */
enum { MF_MAX_RANK = 8, MF_ALIGNMENT = 64 };

typedef enum mf_dtype {
  MF_FLOAT32 = 1, MF_FLOAT64 = 2, MF_INT32 = 3, MF_INT64 = 4, MF_BOOL = 5, MF_UINT8 = 6,
  MF_STRING = 7, MF_COMPLEX64 = 8, MF_COMPLEX128 = 9
} mf_dtype;
/* Complex elements (MF_COMPLEX64, MF_COMPLEX128) are C99's float complex and
 * double complex: the real part, then the imaginary part. */

/* An element of a string value (dtype MF_STRING, TensorFlow's tf.string): a
 * byte string of `length` bytes (any bytes, NUL included) that start
 * `offset` bytes from the element itself. A string value owns one buffer:
 * its elements, then the bytes of all its strings, so it moves by one copy
 * of mf_tensor_nbytes bytes and its elements are read where they lie, never
 * copied one by one. String values are immutable once built; they live in
 * host memory only. A zero-filled element is the empty string. */
typedef struct mf_tstring { int64_t offset; int64_t length; } mf_tstring;

/* TensorFlow's status codes. */
typedef enum mf_code {
  MF_OK = 0, MF_CANCELLED = 1, MF_UNKNOWN = 2, MF_INVALID_ARGUMENT = 3,
  MF_NOT_FOUND = 5, MF_ALREADY_EXISTS = 6, MF_PERMISSION_DENIED = 7,
  MF_RESOURCE_EXHAUSTED = 8, MF_FAILED_PRECONDITION = 9, MF_OUT_OF_RANGE = 11,
  MF_UNIMPLEMENTED = 12, MF_INTERNAL = 13, MF_DATA_LOSS = 15
} mf_code;

typedef enum mf_device_type { MF_CPU = 0, MF_CUDA = 1, MF_NUM_DEVICE_TYPES = 2 } mf_device_type;

typedef struct mf_status mf_status;
typedef struct mf_tensor mf_tensor;     /* a refcounted value */
typedef struct mf_graph mf_graph;       /* refcounted */
typedef struct mf_op mf_op;             /* owned by its graph */
typedef struct mf_op_desc mf_op_desc;   /* an op under construction */
typedef struct mf_session mf_session;
typedef struct mf_callable mf_callable; /* owned by its session */

/* A port: output `index` of `op`. */
typedef struct mf_output { mf_op *op; int index; } mf_output;

/* A static shape: rank -1 is unknown rank, a dim of -1 is unknown. */
typedef struct mf_shape { int rank; int64_t dims[MF_MAX_RANK]; } mf_shape;

/* --- status --- */
MF_API mf_status *mf_status_new(void);                 /* new; free with mf_status_free */
MF_API void mf_status_free(mf_status *s);
MF_API mf_code mf_status_code(const mf_status *s);
MF_API const char *mf_status_message(const mf_status *s); /* owned by s */
MF_API void mf_status_clear(mf_status *s);

/* sizeof of a public struct by name ("mf_shape", "mf_output"); 0 if unknown.
 * The FFI binding checks its generated layouts against this. */
MF_API size_t mf_abi_sizeof(const char *type_name);
/* The version the library was built as, MF_VERSION then ("0.1.0"); static. */
MF_API const char *mf_version(void);

/* --- dtypes --- */
MF_API size_t mf_dtype_size(mf_dtype t);               /* 0 for an invalid dtype */
MF_API const char *mf_dtype_name(mf_dtype t);          /* "float32", …; static */

/* --- values --- */
/* New zero-filled value, 64-byte aligned, on the CPU. New reference. */
MF_API mf_tensor *mf_tensor_new(mf_dtype dtype, int rank, const int64_t *dims, mf_status *s);
/* Wraps caller memory without copying. `release(data, arg)` runs when the
 * last reference goes (may be NULL). data must be aligned for dtype. */
MF_API mf_tensor *mf_tensor_wrap(mf_dtype dtype, int rank, const int64_t *dims, void *data,
                          void (*release)(void *data, void *arg), void *arg, mf_status *s);
MF_API mf_tensor *mf_tensor_retain(mf_tensor *t);      /* returns t */
MF_API void mf_tensor_release(mf_tensor *t);           /* NULL is fine */
MF_API int mf_tensor_refcount(const mf_tensor *t);
MF_API mf_dtype mf_tensor_dtype(const mf_tensor *t);
MF_API int mf_tensor_rank(const mf_tensor *t);
MF_API const int64_t *mf_tensor_dims(const mf_tensor *t); /* owned by t */
MF_API int64_t mf_tensor_size(const mf_tensor *t);     /* number of elements */
MF_API size_t mf_tensor_nbytes(const mf_tensor *t);   /* strings: elements and their bytes */
MF_API void *mf_tensor_data(mf_tensor *t);             /* owned by t */
MF_API mf_device_type mf_tensor_device(const mf_tensor *t);
/* New string value of shape dims holding copies of its n elements (n the
 * product of dims): bytes[i][0 .. lengths[i]). New reference. mf_tensor_new
 * makes one of empty strings; mf_tensor_wrap takes no strings. */
MF_API mf_tensor *mf_tensor_new_strings(int rank, const int64_t *dims, const char *const *bytes,
                                 const int64_t *lengths, mf_status *s);
/* Element i of string value t: its bytes (owned by t, not NUL-terminated)
 * and their number in *length. */
MF_API const char *mf_tensor_string(const mf_tensor *t, int64_t i, int64_t *length);

/* --- files --- */
/* Writes the n chunks data[i][0 .. sizes[i]) to `path` crash-safely: into a
 * new temporary file beside it ("<path>.tmp-<pid>-<k>"), flushed to disk,
 * renamed over path, then the directory flushed, so that a crash at any point
 * leaves the old file or the new one, never a part. Temporary files of path
 * left by writers that died are removed first. On error path is unchanged:
 * NOT_FOUND when its directory is missing or not writable,
 * RESOURCE_EXHAUSTED when the disk or a file size limit is full, UNKNOWN for
 * other I/O errors. */
MF_API mf_code mf_file_write_atomic(const char *path, const void *const *data, const size_t *sizes, int n,
                             mf_status *s);

/* --- TFRecord files --- */
/* TensorFlow's record files: each record is its length (8 bytes, little
 * endian), the masked CRC-32C of the length (4), the data, and the masked
 * CRC-32C of the data (4). `compression` is "" (none), "GZIP" (the whole
 * file one gzip stream) or "ZLIB" (one zlib stream, RFC 1950); anything else
 * is INVALID_ARGUMENT. */
typedef struct mf_record_writer mf_record_writer;
/* Starts writing path crash-safely: records go to a temporary file beside it,
 * which close renames over path (until then path is unchanged). New; NULL
 * with s set when the file cannot be created. */
MF_API mf_record_writer *mf_record_writer_open(const char *path, const char *compression, mf_status *s);
MF_API mf_code mf_record_writer_write(mf_record_writer *w, const void *data, size_t n, mf_status *s);
/* Pushes what was written to the temporary file (not to path). */
MF_API mf_code mf_record_writer_flush(mf_record_writer *w, mf_status *s);
/* Finishes the file and puts it in place; then frees w. An error (a full
 * disk) leaves path unchanged. */
MF_API mf_code mf_record_writer_close(mf_record_writer *w, mf_status *s);
/* Drops what was written, leaving path unchanged, and frees w. NULL is fine. */
MF_API void mf_record_writer_abandon(mf_record_writer *w);

typedef struct mf_record_reader mf_record_reader;
/* Opens path for reading records. With skip_corrupt, a record whose data
 * fails its CRC is skipped (and counted) rather than an error; a bad length
 * or a truncated record ends the file, counted once, since nothing after it
 * can be found. New; NULL with s set (NOT_FOUND when path cannot be opened). */
MF_API mf_record_reader *mf_record_reader_open(const char *path, const char *compression, bool skip_corrupt,
                                        mf_status *s);
/* The next record: *data (owned by r, valid until the next call) and *n.
 * OUT_OF_RANGE at the end of the file; DATA_LOSS naming the file and the
 * record's offset (in the uncompressed stream) for a corrupt record. */
MF_API mf_code mf_record_reader_next(mf_record_reader *r, const char **data, size_t *n, mf_status *s);
/* Corrupt records skipped so far (skip_corrupt). */
MF_API int64_t mf_record_reader_skipped(const mf_record_reader *r);
MF_API void mf_record_reader_free(mf_record_reader *r);  /* NULL is fine */

/* --- tf.train.Example --- */
/* TensorFlow's Example message (example.proto, feature.proto): named
 * features, each a list of floats, int64s or byte strings, packed and parsed
 * with protobuf-c. Features keep the order they were set or parsed in. */
typedef struct mf_example mf_example;
typedef enum mf_feature_kind {
  MF_FEATURE_NONE = 0, MF_FEATURE_BYTES = 1, MF_FEATURE_FLOATS = 2, MF_FEATURE_INT64S = 3
} mf_feature_kind;
MF_API mf_example *mf_example_new(void);                /* new, empty; NULL when out of memory */
MF_API void mf_example_free(mf_example *e);             /* NULL is fine */
/* Sets feature key (replacing one of that key) to copies of n values. */
MF_API mf_code mf_example_set_floats(mf_example *e, const char *key, const float *v, size_t n, mf_status *s);
MF_API mf_code mf_example_set_int64s(mf_example *e, const char *key, const int64_t *v, size_t n, mf_status *s);
MF_API mf_code mf_example_set_bytes(mf_example *e, const char *key, const char *const *v, const size_t *lengths,
                             size_t n, mf_status *s);
/* Sets feature key (replacing one of that key) to one of no kind: a Feature holding no list. */
MF_API mf_code mf_example_set_empty(mf_example *e, const char *key, mf_status *s);
/* The wire bytes into *out (new, free with mf_free_bytes) and *n. */
MF_API mf_code mf_example_serialize(const mf_example *e, char **out, size_t *n, mf_status *s);
MF_API void mf_free_bytes(char *p);
/* Parses wire bytes; new, or NULL with s set (INVALID_ARGUMENT) when they
 * are no Example. */
MF_API mf_example *mf_example_parse(const void *data, size_t n, mf_status *s);
MF_API int mf_example_num_features(const mf_example *e);
MF_API const char *mf_example_key(const mf_example *e, int i);   /* owned by e; NULL out of range */
MF_API int mf_example_find(const mf_example *e, const char *key); /* index, or -1 */
/* For i in [0, mf_example_num_features): the kind, the number of values and
 * the values (owned by e). */
MF_API mf_feature_kind mf_example_kind(const mf_example *e, int i);
MF_API size_t mf_example_count(const mf_example *e, int i);
MF_API const float *mf_example_floats(const mf_example *e, int i);
MF_API const int64_t *mf_example_int64s(const mf_example *e, int i);
MF_API const char *mf_example_bytes(const mf_example *e, int i, size_t j, size_t *length);

/* --- tf.train.SequenceExample --- */
/* TensorFlow's SequenceExample message: context features (an mf_example)
 * and named feature lists, each a sequence of features (its steps). A
 * feature list is held as an mf_example whose features, in order, are its
 * steps; the parser keys them by position ("0", "1", ...), and a builder
 * sets them with any distinct keys, in order. Lists keep the order they were
 * added or parsed in. */
typedef struct mf_sequence_example mf_sequence_example;
MF_API mf_sequence_example *mf_sequence_example_new(void);        /* new, empty; NULL when out of memory */
MF_API void mf_sequence_example_free(mf_sequence_example *se);    /* NULL is fine */
MF_API mf_example *mf_sequence_example_context(mf_sequence_example *se);  /* owned by se */
/* Feature list key, new and empty (replacing one of that key); owned by se;
 * NULL with s set when out of memory. */
MF_API mf_example *mf_sequence_example_add_list(mf_sequence_example *se, const char *key, mf_status *s);
MF_API int mf_sequence_example_num_lists(const mf_sequence_example *se);
MF_API const char *mf_sequence_example_list_key(const mf_sequence_example *se, int i); /* owned; NULL out of range */
MF_API int mf_sequence_example_find_list(const mf_sequence_example *se, const char *key); /* index, or -1 */
MF_API const mf_example *mf_sequence_example_list(const mf_sequence_example *se, int i); /* owned; NULL out of range */
/* The wire bytes into *out (new, free with mf_free_bytes) and *n. */
MF_API mf_code mf_sequence_example_serialize(const mf_sequence_example *se, char **out, size_t *n, mf_status *s);
/* Parses wire bytes; new, or NULL with s set (INVALID_ARGUMENT) when they
 * are no SequenceExample. */
MF_API mf_sequence_example *mf_sequence_example_parse(const void *data, size_t n, mf_status *s);

/* --- TensorBoard summaries and event files --- */
/* Summary messages (TensorFlow's summary.proto), as the summary ops make
 * them: each call writes the wire bytes into *out (new, free with
 * mf_free_bytes) and *n. Tags are bytes with their lengths; one holding a NUL
 * is INVALID_ARGUMENT. */
/* n simple_value entries (values as float32, as TensorFlow stores them). */
MF_API mf_code mf_summary_scalars(int64_t n, const char *const *tags, const size_t *tag_lengths,
                                  const double *values, char **out, size_t *out_n, mf_status *s);
/* One histogram of n values in TensorFlow's default buckets (limits growing
 * by 1.1 from 1e-12 to 1e20, mirrored, with 0 and +-DBL_MAX; runs of empty
 * buckets merged). A NaN or infinite value is INVALID_ARGUMENT. */
MF_API mf_code mf_summary_histogram(const char *tag, size_t tag_length, const double *values, size_t n,
                                    char **out, size_t *out_n, mf_status *s);
/* n images, each under its tag: PNG bytes (pngs[i], png_lengths[i]) of
 * height x width pixels of colorspace channels (1 gray, 3 RGB, 4 RGBA), as
 * the ImageSummary op encodes them. */
MF_API mf_code mf_summary_images(int64_t n, const char *const *tags, const size_t *tag_lengths, int64_t height,
                                 int64_t width, int colorspace, const char *const *pngs, const size_t *png_lengths,
                                 char **out, size_t *out_n, mf_status *s);
/* The serialized SummaryMetadata naming a TensorBoard plugin
 * (plugin_data.plugin_name; "text" for the text plugin). */
MF_API mf_code mf_summary_plugin_metadata(const char *plugin_name, char **out, size_t *out_n, mf_status *s);
/* One value holding a string tensor (a DT_STRING TensorProto of the rank
 * dims, the product of dims strings with their lengths, row-major) with the
 * serialized SummaryMetadata of metadata_n bytes (0: none); INVALID_ARGUMENT
 * when those bytes are no SummaryMetadata. */
MF_API mf_code mf_summary_strings(const char *tag, size_t tag_length, int rank, const int64_t *dims,
                                  const char *const *strings, const size_t *lengths, const void *metadata,
                                  size_t metadata_n, char **out, size_t *out_n, mf_status *s);
/* The values of n serialized Summaries in one; INVALID_ARGUMENT when one is
 * no Summary or a tag comes twice. */
MF_API mf_code mf_summary_merge(int64_t n, const char *const *summaries, const size_t *lengths, char **out,
                                size_t *out_n, mf_status *s);

/* Event files: "<logdir>/events.out.tfevents.<seconds>.<host><suffix>"
 * holding TFRecord-framed Events, the first with file_version
 * "brain.Event:2". Events are kept in memory until flush, which appends them
 * whole (one write) and syncs the file; the file is never renamed, so
 * TensorBoard can read it while it grows, and a writer that dies mid-write
 * leaves at most a truncated last record, which readers skip. */
typedef struct mf_event_writer mf_event_writer;
/* Creates logdir (and its parents) and a new event file in it (".1", ".2"...
 * appended when another of the same second exists). New; NULL with s set:
 * NOT_FOUND when the directory or the file cannot be made. */
MF_API mf_event_writer *mf_event_writer_open(const char *logdir, const char *suffix, mf_status *s);
MF_API const char *mf_event_writer_path(const mf_event_writer *w);  /* owned by w */
/* A serialized Summary as an Event of step and wall_time (seconds since the
 * epoch); INVALID_ARGUMENT when the bytes are no Summary. */
MF_API mf_code mf_event_writer_add_summary(mf_event_writer *w, const void *summary, size_t n, int64_t step,
                                           double wall_time, mf_status *s);
/* A serialized GraphDef (TensorBoard's graph) as an Event of wall_time; the
 * bytes are copied as they are, not checked. */
MF_API mf_code mf_event_writer_add_graph(mf_event_writer *w, const void *graph_def, size_t n, double wall_time,
                                         mf_status *s);
/* A serialized Event as it is; INVALID_ARGUMENT when the bytes are no Event. */
MF_API mf_code mf_event_writer_add_event(mf_event_writer *w, const void *event, size_t n, mf_status *s);
MF_API mf_code mf_event_writer_flush(mf_event_writer *w, mf_status *s);
/* Flushes, closes the file and frees w (even when the flush fails). */
MF_API mf_code mf_event_writer_close(mf_event_writer *w, mf_status *s);
/* Closes without flushing what is pending, and frees w. NULL is fine. */
MF_API void mf_event_writer_free(mf_event_writer *w);
/* Seconds since the epoch, as events record them. */
MF_API double mf_wall_time(void);

/* An Event read back, through accessors; strings and arrays are owned by it. */
typedef struct mf_event mf_event;
typedef enum mf_summary_kind {
  MF_SUMMARY_SCALAR = 0, MF_SUMMARY_HISTOGRAM = 1, MF_SUMMARY_IMAGE = 2, MF_SUMMARY_OTHER = 3, MF_SUMMARY_TENSOR = 4
} mf_summary_kind;
typedef struct mf_histogram {
  double min, max, num, sum, sum_squares;
  size_t num_buckets;
  const double *bucket_limit, *bucket;  /* owned by the event */
} mf_histogram;
/* New, or NULL with s set (DATA_LOSS) when the bytes are no Event. */
MF_API mf_event *mf_event_parse(const void *data, size_t n, mf_status *s);
MF_API void mf_event_free(mf_event *e);  /* NULL is fine */
MF_API double mf_event_wall_time(const mf_event *e);
MF_API int64_t mf_event_step(const mf_event *e);
MF_API const char *mf_event_file_version(const mf_event *e);          /* NULL when the event holds none */
MF_API const char *mf_event_graph_def(const mf_event *e, size_t *n);  /* NULL when the event holds none */
MF_API bool mf_event_has_summary(const mf_event *e);
/* For i in [0, mf_event_num_values) (0 without a summary): */
MF_API int mf_event_num_values(const mf_event *e);
MF_API const char *mf_event_value_tag(const mf_event *e, int i);
MF_API mf_summary_kind mf_event_value_kind(const mf_event *e, int i);
MF_API double mf_event_value_scalar(const mf_event *e, int i);                     /* MF_SUMMARY_SCALAR */
MF_API void mf_event_value_histogram(const mf_event *e, int i, mf_histogram *h);   /* MF_SUMMARY_HISTOGRAM */
/* MF_SUMMARY_IMAGE: the encoded image (*n bytes) and its size. */
MF_API const char *mf_event_value_image(const mf_event *e, int i, int *height, int *width, int *colorspace,
                                        size_t *n);
/* MF_SUMMARY_TENSOR: the tensor's rank (its first MF_MAX_RANK dims written
 * into dims), its number of strings (string_val; 0 for other dtypes) and
 * string j of them (*n bytes). */
MF_API int mf_event_value_tensor_shape(const mf_event *e, int i, int64_t *dims);
MF_API size_t mf_event_value_tensor_num_strings(const mf_event *e, int i);
MF_API const char *mf_event_value_tensor_string(const mf_event *e, int i, size_t j, size_t *n);
/* The plugin named by the value's metadata ("text"...), or NULL. */
MF_API const char *mf_event_value_plugin(const mf_event *e, int i);

/* --- checkpoints --- */
/* A checkpoint is a safetensors file: an 8-byte little-endian header length,
 * a JSON header naming each value's dtype ("F32", "F64", "I32", "I64", "U8",
 * "BOOL"), shape and data offsets, then the raw little-endian data
 * (docs/api/train.md). tf.train.Saver reads and writes it through these. */
typedef struct mf_checkpoint mf_checkpoint; /* a checkpoint read whole: names and values */
/* Reads and checks the whole file at path: the JSON header, every entry, that
 * the values cover the data exactly once, bool values 0 or 1. New; free with
 * mf_checkpoint_free. NULL with s set: NOT_FOUND (no such file),
 * PERMISSION_DENIED, FAILED_PRECONDITION (a directory), DATA_LOSS (not a
 * valid checkpoint: the message says what is wrong where), RESOURCE_EXHAUSTED. */
MF_API mf_checkpoint *mf_checkpoint_read(const char *path, mf_status *s);
MF_API void mf_checkpoint_free(mf_checkpoint *c);       /* NULL is fine */
/* Entries are sorted by name. */
MF_API int mf_checkpoint_num_entries(const mf_checkpoint *c);
MF_API const char *mf_checkpoint_name(const mf_checkpoint *c, int i); /* owned by c; NULL out of range */
MF_API int mf_checkpoint_find(const mf_checkpoint *c, const char *name); /* index of name, -1 if absent */
/* Entry i's value: borrowed, owned by c (mf_tensor_retain keeps it longer); NULL out of range. */
MF_API mf_tensor *mf_checkpoint_value(const mf_checkpoint *c, int i);
/* Writes values[i] (borrowed, host memory, a dtype listed above) under
 * names[i] (distinct, not empty, not "__metadata__") to path, crash-safely
 * as mf_file_write_atomic does; INVALID_ARGUMENT names a bad name or value. */
MF_API mf_code mf_checkpoint_write(const char *path, const char *const *names, mf_tensor *const *values, int n,
                                   mf_status *s);

/* --- JSON --- */
/* A JSON document read with Jansson, for Lua code that takes JSON text
 * (HParams.parse_json); a value is borrowed from its document and lives as
 * long as it. Object members keep the order of the text. */
typedef struct mf_json mf_json;
typedef struct mf_json_value mf_json_value;
typedef enum mf_json_type {
  MF_JSON_OBJECT, MF_JSON_ARRAY, MF_JSON_STRING, MF_JSON_INTEGER, MF_JSON_REAL, MF_JSON_TRUE, MF_JSON_FALSE,
  MF_JSON_NULL
} mf_json_type;
/* Parses text[0 .. len) (one JSON value; a key twice in one object is an
 * error). New; free with mf_json_free. NULL with s set: INVALID_ARGUMENT
 * "line L column C (char P): what is wrong", Jansson's words and position
 * (where it stopped: just past the offending token, P bytes read),
 * RESOURCE_EXHAUSTED. */
MF_API mf_json *mf_json_parse(const char *text, size_t len, mf_status *s);
MF_API void mf_json_free(mf_json *j);                   /* NULL is fine */
MF_API const mf_json_value *mf_json_root(const mf_json *j); /* owned by j */
MF_API mf_json_type mf_json_type_of(const mf_json_value *v);
MF_API double mf_json_number(const mf_json_value *v);   /* INTEGER, REAL; 0 otherwise */
/* STRING: its bytes (owned by the document, NUL-terminated) and *len; NULL otherwise. */
MF_API const char *mf_json_string(const mf_json_value *v, size_t *len);
MF_API size_t mf_json_length(const mf_json_value *v);   /* ARRAY, OBJECT: items, members; 0 otherwise */
/* Item i of an ARRAY, value of member i of an OBJECT (owned by the document);
 * NULL out of range or for other types. */
MF_API const mf_json_value *mf_json_item(const mf_json_value *v, size_t i);
/* Key of member i of an OBJECT (owned by the document, NUL-terminated; *len
 * its bytes); NULL out of range or for other types. */
MF_API const char *mf_json_key(const mf_json_value *v, size_t i, size_t *len);

/* --- graph files --- */
/* A graph file (JSON, format "moonflow.graph": src/io/graph_file.c,
 * docs/api/train.md) holds a graph with its function graphs (branches, loop
 * bodies) and what the program that wrote it recorded beside them: its
 * variables (to initialize, save and restore them), its collections and its
 * variable store (tf.get_variable's names). tf.train.write_graph and
 * tf.train.import_graph go through these. Strings in these structs are owned
 * by the mf_graph_file they come from; the add functions copy theirs. */
typedef struct mf_graph_file mf_graph_file;
typedef struct mf_graph_file_variable {
  const char *tensor;         /* the variable's value, "dense/w:0" (output 0 of a VariableV2 op) */
  const char *initializer;    /* the op that assigns its initial value, "dense/w/Assign" */
  const char *initial_value;  /* the tensor it assigns; NULL when not recorded */
  bool trainable;
} mf_graph_file_variable;
typedef enum mf_item_kind {
  MF_ITEM_TENSOR, MF_ITEM_OP, MF_ITEM_NUMBER, MF_ITEM_STRING, MF_ITEM_BOOL
} mf_item_kind;
typedef struct mf_graph_file_item {  /* one item of a collection */
  const char *collection;     /* the collection's key */
  mf_item_kind kind;
  const char *text;           /* TENSOR, OP: its name ("y:0", "train"); STRING: the string */
  double number;              /* NUMBER */
  bool flag;                  /* BOOL */
} mf_graph_file_item;
typedef struct mf_graph_file_name { const char *name, *tensor; } mf_graph_file_name; /* "scope/w" -> "scope/w:0" */
/* A graph file of g to be written (retains g). New; free with mf_graph_file_free.
 * NULL when out of memory. */
MF_API mf_graph_file *mf_graph_file_new(mf_graph *g);
/* What goes beside the graph; names must be tensors and ops of g, else INVALID_ARGUMENT. */
MF_API mf_code mf_graph_file_add_variable(mf_graph_file *f, const mf_graph_file_variable *v, mf_status *s);
MF_API mf_code mf_graph_file_add_item(mf_graph_file *f, const mf_graph_file_item *item, mf_status *s);
MF_API mf_code mf_graph_file_add_stored(mf_graph_file *f, const char *name, const char *tensor, mf_status *s);
/* Writes f to path crash-safely (as mf_file_write_atomic). A LuaFunc op
 * (a host function) cannot be written: INVALID_ARGUMENT naming it. */
MF_API mf_code mf_graph_file_write(const mf_graph_file *f, const char *path, mf_status *s);
/* Reads a graph file into a new graph: every op, name and id as written.
 * New; free with mf_graph_file_free. NULL with s set: NOT_FOUND, or
 * INVALID_ARGUMENT naming the file, the function, the op and the attribute
 * that is wrong. A file whose first character (after white space) is no '{'
 * is read as a binary TensorFlow GraphDef (mf_graphdef_import): a frozen
 * model, with no variables recorded; its errors are mf_graphdef_import's. */
MF_API mf_graph_file *mf_graph_file_read(const char *path, mf_status *s);
MF_API mf_graph *mf_graph_file_graph(const mf_graph_file *f); /* borrowed: mf_graph_retain keeps it */
/* The recorded variables, collection items (in order, collections by key) and
 * variable store entries; *out is owned by f. Returns the count. */
MF_API int mf_graph_file_variables(const mf_graph_file *f, const mf_graph_file_variable **out);
MF_API int mf_graph_file_items(const mf_graph_file *f, const mf_graph_file_item **out);
MF_API int mf_graph_file_stored(const mf_graph_file *f, const mf_graph_file_name **out);
MF_API void mf_graph_file_free(mf_graph_file *f);       /* NULL is fine */
/* The port a name gives in g: "y:1" (output 1 of op y) or "y" (output 0);
 * NOT_FOUND when g has none. */
MF_API mf_code mf_graph_port(const mf_graph *g, const char *name, mf_output *out, mf_status *s);
/* A graph file's model in a session of its graph (a C host's
 * tf.global_variables_initializer and tf.train.Saver()): initialize runs every
 * recorded variable's initializer; restore sets every recorded variable from
 * checkpoint path, the entry named by the variable's op ("dense/w"), checking
 * all of them (present, dtype, shape) before assigning any, then assigning
 * them in one run (each initializer with the checkpoint's value fed in place
 * of its initial value); save writes their values under those names, the
 * checkpoint tf.train.Saver():save writes. */
MF_API mf_code mf_graph_file_initialize(const mf_graph_file *f, mf_session *sess, mf_status *s);
MF_API mf_code mf_graph_file_restore(const mf_graph_file *f, mf_session *sess, const char *path, mf_status *s);
MF_API mf_code mf_graph_file_save(const mf_graph_file *f, mf_session *sess, const char *path, mf_status *s);

/* --- TensorFlow GraphDef --- */
/* TensorFlow's GraphDef (graph.proto): g written as one, binary or in
 * protobuf's text format, and a GraphDef (a frozen TensorFlow 1.x model)
 * imported into a moonflow graph (src/io/tf_graphdef_ops.c lists the ops both ways).
 * Serialize: the bytes into *out (new, free with mf_free_bytes) and *n; an
 * op TensorFlow has no counterpart of is UNIMPLEMENTED, every such type
 * listed with its count. Write: the same to path, crash-safely. */
MF_API mf_code mf_graphdef_serialize(const mf_graph *g, bool as_text, char **out, size_t *n, mf_status *s);
MF_API mf_code mf_graphdef_write(const mf_graph *g, const char *path, bool as_text, mf_status *s);
/* Import: input_map puts ports of g in place of the GraphDef's tensors named
 * "x:0" (or "x") before the nodes are built. Arrays owned by the caller. */
typedef struct mf_graphdef_options {
  int num_input_map;
  const char *const *input_map_names;
  const mf_output *input_map_ports;
} mf_graphdef_options;
/* Adds the nodes of binary GraphDef data[0..n) to g under g's current name
 * scope, each op named as its node (options may be NULL). Errors:
 * INVALID_ARGUMENT for bytes that are no GraphDef or a bad node (named),
 * UNIMPLEMENTED listing every op type moonflow lacks with its count (then
 * nothing is added; after a later error, the ops built so far stay in g). */
MF_API mf_code mf_graphdef_import(mf_graph *g, const void *data, size_t n, const mf_graphdef_options *options,
                                  mf_status *s);

/* --- devices --- */
/* Devices of this process of a type: 1 for MF_CPU (a session may split it
 * into several, mf_session_config.device_count); for MF_CUDA the GPUs the
 * CUDA backend (libmoonflow_cuda.so, loaded on the first call) reports, as
 * CUDA_VISIBLE_DEVICES limits them: 0 without a backend, a driver or a GPU
 * (mf_gpu_status says why). */
MF_API int mf_num_devices(mf_device_type type);
/* Memory of device `index` of `type` in bytes (the CPU: physical RAM; a GPU:
 * its total memory); -1 when there is no such device. */
MF_API int64_t mf_device_memory_limit(mf_device_type type, int index);
/* The model of device `index` of `type` ("NVIDIA H100 80GB HBM3"; "" for the
 * CPU), NULL when there is no such device. Static: owned by the library. */
MF_API const char *mf_device_description(mf_device_type type, int index);
/* Whether the CUDA backend was found: built (make found nvcc), beside the
 * library (or at MOONFLOW_CUDA_LIB) and not disabled by MOONFLOW_CUDA=0. It
 * is loaded only when the NVIDIA driver reports a GPU. */
MF_API bool mf_cuda_backend_found(void);
/* Why this process has no GPU ("no CUDA backend (...): moonflow was built
 * without nvcc", "no NVIDIA driver (libcuda.so.1 not found)"), "" when it
 * has one. Static: owned by the library. */
MF_API const char *mf_gpu_status(void);
/* Parses TensorFlow device string `spec` ("/cpu:0", "/gpu:1", "CPU:0",
 * "/device:GPU:0", "/job:localhost/replica:0/task:0/device:CPU:0") and merges
 * it over `outer` (a device string, NULL or "" for none) as tf.device nests:
 * fields spec names override outer's. Writes the normal form
 * ("/device:CPU:0", "/job:localhost/device:GPU:*", "" when nothing is named)
 * into out[0..cap) (256 bytes always suffice). A malformed string is
 * INVALID_ARGUMENT naming it. */
MF_API mf_code mf_device_merge(const char *outer, const char *spec, char *out, size_t cap, mf_status *s);

/* --- graphs --- */
MF_API mf_graph *mf_graph_new(void);                   /* new reference */
MF_API mf_graph *mf_graph_retain(mf_graph *g);
MF_API void mf_graph_release(mf_graph *g);
MF_API int mf_graph_num_ops(const mf_graph *g);
MF_API mf_op *mf_graph_op(const mf_graph *g, int i);   /* in creation order */
MF_API mf_op *mf_graph_op_by_name(const mf_graph *g, const char *name); /* NULL if none */
MF_API void mf_graph_finalize(mf_graph *g);
MF_API bool mf_graph_finalized(const mf_graph *g);
/* Enters a name scope. `name` is made unique ("s", "s_1") unless it ends with
 * '/', which re-enters that exact scope; "" returns to the root. Returns the
 * full scope ("outer/s/"), owned by the graph until the scope is left. */
MF_API const char *mf_graph_push_name_scope(mf_graph *g, const char *name, mf_status *s);
MF_API void mf_graph_pop_name_scope(mf_graph *g);
MF_API const char *mf_graph_name_scope(const mf_graph *g); /* "" or "a/b/" */
/* Graph-level random seed: -1 when unset. */
MF_API void mf_graph_set_seed(mf_graph *g, int64_t seed);
MF_API int64_t mf_graph_seed(const mf_graph *g);

/* --- building ops --- */
/* name may be NULL (the op type is used); it is prefixed with the current
 * name scope and made unique. */
MF_API mf_op_desc *mf_op_desc_new(mf_graph *g, const char *type, const char *name);
MF_API void mf_op_desc_add_input(mf_op_desc *d, mf_output in);
/* The same for output `index` of the op numbered `op_id` (mf_op_id) of the
 * description's graph: no struct passed by value, which LuaJIT compiles. */
MF_API void mf_op_desc_add_input_id(mf_op_desc *d, int op_id, int index);
MF_API void mf_op_desc_add_control_input(mf_op_desc *d, mf_op *op);
MF_API void mf_op_desc_set_attr_int(mf_op_desc *d, const char *name, int64_t v);
MF_API void mf_op_desc_set_attr_float(mf_op_desc *d, const char *name, double v);
MF_API void mf_op_desc_set_attr_bool(mf_op_desc *d, const char *name, bool v);
MF_API void mf_op_desc_set_attr_type(mf_op_desc *d, const char *name, mf_dtype v);
MF_API void mf_op_desc_set_attr_ints(mf_op_desc *d, const char *name, const int64_t *v, int n);
MF_API void mf_op_desc_set_attr_shape(mf_op_desc *d, const char *name, const int64_t *dims, int rank);
MF_API void mf_op_desc_set_attr_string(mf_op_desc *d, const char *name, const char *v);
MF_API void mf_op_desc_set_attr_tensor(mf_op_desc *d, const char *name, mf_tensor *v); /* retains v */
MF_API void mf_op_desc_set_attr_graph(mf_op_desc *d, const char *name, mf_graph *v);   /* retains v */
/* A tensor attribute holding a scalar of `dtype` with value v (converted as
 * C converts a double): constants made from numbers. Values are immutable, so
 * constants of one value and dtype in a graph may share one tensor. */
MF_API void mf_op_desc_set_attr_scalar(mf_op_desc *d, const char *name, mf_dtype dtype, double v);
/* Where the op was created, e.g. "train.lua:12"; quoted in its errors. */
MF_API void mf_op_desc_set_origin(mf_op_desc *d, const char *where);
MF_API void mf_op_desc_set_device(mf_op_desc *d, const char *device);
/* Validates, infers shapes and adds the op. Always consumes d. Returns the op
 * (owned by the graph) or NULL with s set; on error the graph is unchanged. */
MF_API mf_op *mf_op_desc_finish(mf_op_desc *d, mf_status *s);

/* --- inspecting ops --- */
MF_API const char *mf_op_name(const mf_op *op);
MF_API const char *mf_op_type(const mf_op *op);
MF_API const char *mf_op_origin(const mf_op *op);      /* "" if unknown */
MF_API const char *mf_op_device(const mf_op *op);      /* "" if unset */
MF_API mf_graph *mf_op_graph(const mf_op *op);         /* borrowed */
MF_API int mf_op_id(const mf_op *op);                  /* index in creation order */
MF_API int mf_op_num_inputs(const mf_op *op);
MF_API mf_output mf_op_input(const mf_op *op, int i);
MF_API int mf_op_num_control_inputs(const mf_op *op);
MF_API mf_op *mf_op_control_input(const mf_op *op, int i);
MF_API int mf_op_num_outputs(const mf_op *op);
MF_API mf_dtype mf_op_output_dtype(const mf_op *op, int i);
MF_API void mf_op_output_shape(const mf_op *op, int i, mf_shape *out);
/* Refines a static shape (Tensor.set_shape); incompatible shapes are an error. */
MF_API mf_code mf_op_set_output_shape(mf_op *op, int i, const mf_shape *shape, mf_status *s);
/* Attribute getters: false when the op has no such attribute of that kind. */
MF_API bool mf_op_attr_int(const mf_op *op, const char *name, int64_t *out);
MF_API bool mf_op_attr_float(const mf_op *op, const char *name, double *out);
MF_API bool mf_op_attr_bool(const mf_op *op, const char *name, bool *out);
MF_API bool mf_op_attr_type(const mf_op *op, const char *name, mf_dtype *out);
MF_API int mf_op_attr_ints(const mf_op *op, const char *name, const int64_t **out); /* -1 if absent */
MF_API const char *mf_op_attr_string(const mf_op *op, const char *name);          /* NULL if absent */
MF_API mf_tensor *mf_op_attr_tensor(const mf_op *op, const char *name);           /* borrowed */
/* Op registry: whether an op type exists. */
MF_API bool mf_op_type_registered(const char *type);
/* Listing the registry (tools, and the spec that checks every op is complete):
 * the number of op types and the name of the i-th, in registration order
 * (NULL outside [0, count)); names are static strings. */
MF_API int mf_registry_num_ops(void);
MF_API const char *mf_registry_op_name(int i);
/* What a registration provides. */
typedef struct mf_op_info {
  int num_inputs;          /* a minimum when variadic_inputs */
  int num_outputs;         /* -1: set by shape inference */
  bool variadic_inputs;
  bool stateful;
  bool has_shape_fn;
  bool has_kernel[MF_NUM_DEVICE_TYPES];
  bool has_gradient;
  bool not_differentiable; /* declared without a gradient on purpose */
  unsigned ref_inputs;     /* bit k: input k is a reference to a variable */
  unsigned value_inputs;   /* bit k: shape inference reads input k's value (Reshape's shape) */
  unsigned host_memory_inputs; /* bit k: input k stays in host memory: its value is read
                                  there, by inference or by the kernel (If's predicate) */
  bool constant;           /* the op's value is known when it is built (Const) */
  bool variable;           /* the op is a variable, its value per-session state */
  bool internal;           /* built only by the engine (gradients, control flow), no Lua wrapper */
  bool elementwise;        /* an elementwise op (one element loop; fusable) */
  unsigned gpu_dtypes;     /* bit (1u << dtype): the dtypes its GPU kernel takes; 0 with one: any
                              but strings and complex values */
} mf_op_info;
/* False when type is not registered. */
MF_API bool mf_registry_op_info(const char *type, mf_op_info *out);
/* Enumerating attributes (graph files, tools): kinds, names and the getters
 * the kinds above lack. A function-valued attribute (GRAPH) holds a subgraph
 * (a branch or loop body of control flow, see src/ops/control/call.c). */
typedef enum mf_attr_kind {
  MF_ATTR_INT, MF_ATTR_FLOAT, MF_ATTR_BOOL, MF_ATTR_TYPE, MF_ATTR_INTS,
  MF_ATTR_SHAPE, MF_ATTR_STRING, MF_ATTR_TENSOR, MF_ATTR_GRAPH
} mf_attr_kind;
MF_API int mf_op_num_attrs(const mf_op *op);
MF_API const char *mf_op_attr_name(const mf_op *op, int i);    /* owned by op; NULL out of range */
MF_API mf_attr_kind mf_op_attr_kind(const mf_op *op, int i);   /* i in [0, mf_op_num_attrs) */
MF_API bool mf_op_attr_shape(const mf_op *op, const char *name, mf_shape *out);
MF_API mf_graph *mf_op_attr_graph(const mf_op *op, const char *name); /* borrowed; NULL if absent */

/* --- automatic differentiation --- */
/* Adds to g the ops computing dxs[i] = sum over j of d(ys[j] . grad_ys[j]) / d(xs[i]).
 * grad_ys may be NULL (ones). dxs[i].op is NULL when xs[i] does not reach any y
 * (or only through integer values). New ops go under the name scope
 * "gradients/" and quote `origin` (e.g. "train.lua:12", may be NULL) in errors.
 * An op on the path without a gradient rule is an error naming its type. */
MF_API mf_code mf_gradients(mf_graph *g, const mf_output *ys, int ny, const mf_output *xs, int nx,
                     const mf_output *grad_ys, mf_output *dxs, const char *origin, mf_status *s);

/* --- sessions --- */
MF_API mf_session *mf_session_new(mf_graph *g, mf_status *s); /* retains g */
/* Session options (TensorFlow's ConfigProto fields), or-ed together.
 * Placement, decided once per plan: each op runs on the device its device
 * string names (none: CPU:0), among the session's devices. An op taking a
 * variable by reference (Assign, AssignAdd, the optimizers' apply ops) runs
 * where its variable is, as TensorFlow colocates them, whatever its own
 * string says. A device that is not present, or lacks a kernel for the op,
 * is an error when the plan is built, unless MF_ALLOW_SOFT_PLACEMENT puts
 * the op on CPU:0 instead. MF_LOG_DEVICE_PLACEMENT records a line per op of
 * each new plan, "a: (Add): /job:localhost/replica:0/task:0/device:CPU:0"
 * (and a line for each op soft placement moved), for the host to print:
 * mf_session_take_placement_log. */
/* Threads (TensorFlow's contract):
 * - Safe from several threads at once on one session: mf_session_run,
 *   mf_session_make_callable, mf_callable_run (also one callable from many
 *   threads), mf_callable_run_async, mf_session_take_placement_log and the
 *   counters. Each run has its own run state; plans are built once, under the
 *   session's lock. Ops of one graph run on the thread that runs them.
 * - Variables: a read sees a whole value, never a half-written one; updates
 *   of one variable (Assign, AssignAdd, the optimizers' apply ops) are
 *   serialized, as TensorFlow's use_locking=True makes them, whatever the
 *   attribute says. Stateful ops (random, Print counts) count every run once.
 * - Not safe: building a graph (mf_op_desc_*, gradients, import) while another
 *   thread builds on or runs the same graph — build first, then run; and
 *   mf_session_close / mf_session_free while another thread uses the session.
 * - A tensor is safe to share read-only between threads; its refcount is atomic.
 * - Host callbacks (mf_host: Lua functions in the graph) run on whichever
 *   thread runs their op; a host that is not thread-safe (a Lua state) must
 *   run such graphs from one thread. */
enum { MF_ALLOW_SOFT_PLACEMENT = 1, MF_LOG_DEVICE_PLACEMENT = 2 };
/* mf_session_new with options; unknown bits are INVALID_ARGUMENT. Retains g. */
MF_API mf_session *mf_session_new_with_options(mf_graph *g, unsigned options, mf_status *s);
/* A session's configuration (TensorFlow's ConfigProto). */
typedef struct mf_session_config {
  unsigned options;                 /* MF_ALLOW_SOFT_PLACEMENT | MF_LOG_DEVICE_PLACEMENT */
  /* Threads that large kernels (elementwise, reductions, softmax and the
   * cross-entropies, convolutions, pooling, gathers and scatters, segment
   * ops, scans, copies) split their work over, the calling thread included:
   * 0 takes MOONFLOW_NUM_THREADS from the environment, else the number of
   * cores. Results are bit for bit the same for every count (OpenBLAS's gemm
   * aside). A number set here or in the environment is also OpenBLAS's
   * thread count, so the two never oversubscribe the cores (OpenBLAS's count
   * is process-wide). */
  int intra_op_parallelism_threads;
  /* Plans fuse chains of elementwise ops (arithmetic, comparisons, casts,
   * BiasAdd, activations) into one step that makes one pass over the data, keeping
   * values that only the chain reads out of memory; results are bit for bit
   * those of the ops run one by one, errors name the op that failed. true
   * runs every op as its own step (to compare, or to time single ops). */
  bool disable_elementwise_fusion;
  /* The devices the session makes of each type (TensorFlow's ConfigProto
   * device_count), indexed by mf_device_type; 0 takes the default: one CPU,
   * every GPU present. CPU: 1 to MF_MAX_CPU_DEVICES. CPU:0 is the host;
   * each further CPU device has an allocator and buffers of its own that
   * the host does not read directly: values reach it and leave it by copies,
   * as with a GPU, so placement and copies can be tested on any machine.
   * GPU: -1 for none, else the most GPUs to use (more than are present
   * takes those present, as TensorFlow's). */
  int device_count[MF_NUM_DEVICE_TYPES];
} mf_session_config;
enum { MF_MAX_CPU_DEVICES = 8 };
/* mf_session_new with a configuration (NULL: the defaults). Retains g. */
MF_API mf_session *mf_session_new_with_config(mf_graph *g, const mf_session_config *config, mf_status *s);
/* The placement lines ('\n'-terminated) recorded since the last call, "" if
 * none; owned by sess, valid until the next call of this function or
 * mf_session_free. Waits for the session's asynchronous jobs first. */
MF_API const char *mf_session_take_placement_log(mf_session *sess);
/* Releases the session's values and plans; idempotent. Runs on a closed
 * session fail with FAILED_PRECONDITION. */
MF_API void mf_session_close(mf_session *sess);
MF_API void mf_session_free(mf_session *sess);         /* closes; NULL is fine */
/* Runs the graph pruned to what `fetches` and `targets` need, with `feeds`
 * replacing the values of those ports. fetch_values receives new references. */
MF_API mf_code mf_session_run(mf_session *sess,
                       const mf_output *feeds, mf_tensor *const *feed_values, int nfeeds,
                       const mf_output *fetches, mf_tensor **fetch_values, int nfetches,
                       mf_op *const *targets, int ntargets, mf_status *s);
/* A prepared (feeds, fetches, targets) signature: the cheapest way to run the
 * same step many times. Owned by the session, valid until it is freed. */
MF_API mf_callable *mf_session_make_callable(mf_session *sess,
                                      const mf_output *feeds, int nfeeds,
                                      const mf_output *fetches, int nfetches,
                                      mf_op *const *targets, int ntargets, mf_status *s);
MF_API mf_code mf_callable_run(mf_callable *c, mf_tensor *const *feed_values,
                        mf_tensor **fetch_values, mf_status *s);
/* mf_callable_run with the results written into the caller's tensors:
 * outputs[i] (borrowed, host memory) must have fetch i's dtype and shape, else
 * INVALID_ARGUMENT. The op computing a fetch writes there directly when it
 * can (else the result is copied), so a steady-state run allocates nothing. */
MF_API mf_code mf_callable_run_into(mf_callable *c, mf_tensor *const *feed_values,
                             mf_tensor *const *outputs, mf_status *s);
/* What the plan of a callable runs: steps (kernel calls per run, a fused
 * group of elementwise ops counting as one), the fused groups and the ops in
 * them (see mf_session_config.disable_elementwise_fusion). */
typedef struct mf_plan_stats {
  int num_steps;
  int num_fused_groups;
  int num_fused_ops;
} mf_plan_stats;
MF_API void mf_callable_plan_stats(const mf_callable *c, mf_plan_stats *out);
/* Asynchronous runs: a callable run on its session's worker thread, so the
 * calling thread can do other work meanwhile (tf.data's prefetch runs the
 * traced map and filter functions this way). Each session has one worker
 * thread, started by its first asynchronous run; it runs the session's jobs
 * one at a time in the order they were started. Until a job has finished, any
 * other use of its session (a run, make_callable, the counters below, close)
 * first waits for the session's jobs, so a caller's runs see its
 * asynchronous runs' effects in order; other sessions are independent and may
 * run meanwhile. A job that mf_async_wait finds next in line and not started
 * yet runs on the waiting thread instead (waiting for the worker's thread to
 * be scheduled would cost more), still in order. The host callbacks of the
 * graph (mf_host) run on whichever of the two threads runs the job. */
typedef struct mf_async mf_async;
/* Starts running c with feed_values (one per feed, retained until the job is
 * waited for or freed, and released on the thread that does that). New; free
 * with mf_async_free. NULL with s set when the session is closed or no thread
 * or memory is to be had; errors of the run itself come from mf_async_wait. */
MF_API mf_async *mf_callable_run_async(mf_callable *c, mf_tensor *const *feed_values, mf_status *s);
/* Waits for the job; returns its code with s set as mf_callable_run would
 * have set it, and on success stores new references in fetch_values. A job
 * is waited for once: again is FAILED_PRECONDITION. A job the session's
 * close cancelled before it ran fails with CANCELLED. */
MF_API mf_code mf_async_wait(mf_async *a, mf_tensor **fetch_values, mf_status *s);
/* Whether the job has finished (mf_async_wait will not block). */
MF_API bool mf_async_done(mf_async *a);
/* Frees a job: one not started yet is cancelled (it never runs), a running
 * one is waited for; results not taken are released. NULL is fine. */
MF_API void mf_async_free(mf_async *a);
/* A session's memory for tensors (its allocator): the buffers of live
 * tensors it made (held by runs, callers or variables), the most ever in use,
 * dead tensors' buffers kept for reuse (bounded by the peak), and how many
 * buffers it took from the system. A steady-state run takes none. */
typedef struct mf_memory_stats {
  uint64_t bytes_in_use;
  uint64_t peak_bytes_in_use;
  uint64_t bytes_kept;
  uint64_t num_allocations;
} mf_memory_stats;
/* Fills out with the sum over the session's devices, after its asynchronous jobs. */
MF_API void mf_session_memory_stats(mf_session *sess, mf_memory_stats *out);
/* A session's devices: CPU:0 (index 0, the host) first, then its other CPU
 * devices, then GPUs (mf_session_config.device_count). */
MF_API int mf_session_num_devices(const mf_session *sess);
/* The full name of device i, "/job:localhost/replica:0/task:0/device:CPU:1";
 * owned by sess; NULL when i is out of range. */
MF_API const char *mf_session_device_name(const mf_session *sess, int i);
/* What one device of a session holds and what crossed it. Where a value
 * computed on one device is read on another (an input of an op placed there,
 * a fetch, which leaves from CPU:0, a feed, which arrives there), the plan
 * copies it once per run for each device that reads it, however many ops
 * read it there; values placed on CPU:0 and read there are never copied. */
typedef struct mf_device_stats {
  mf_memory_stats memory;   /* the device's allocator */
  uint64_t copies_to;       /* values copied onto this device by runs */
  uint64_t copies_from;     /* values copied off it */
  uint64_t bytes_to, bytes_from;
} mf_device_stats;
/* Fills out for device i after the session's asynchronous jobs; false when
 * i is out of range. */
MF_API bool mf_session_device_stats(mf_session *sess, int i, mf_device_stats *out);
/* Number of cached plans (for tests of plan caching). */
MF_API int mf_session_num_plans(const mf_session *sess);
/* Buffers allocated by the session's runs so far (for tests of buffer reuse). */
MF_API uint64_t mf_session_num_allocations(const mf_session *sess);

/* --- host functions: ops that call back into the embedding program --- */
/* A LuaFunc op (tf.lua_func) runs host function `fn_id`, a Print op hands its
 * line of text to the host, and LuaFunc's gradient rule asks the host to build
 * the gradient ops. The callbacks come from the graph the op belongs to
 * (mf_graph_set_host). They must return, never unwind (longjmp, exceptions)
 * through the engine: a failure sets s (mf_status_set_error) and returns its
 * code. They must not run the session that is calling them. */
/* inputs[0..ninputs) are borrowed; on success outputs[0..noutputs) hold new references. */
typedef mf_code (*mf_host_call_fn)(void *ud, const mf_op *op, int64_t fn_id, mf_tensor *const *inputs,
                                   int ninputs, mf_tensor **outputs, int noutputs, mf_status *s);
/* text: what a Print op prints, one line without its newline. */
typedef mf_code (*mf_host_print_fn)(void *ud, const mf_op *op, const char *text, mf_status *s);
/* Builds in g the gradients of LuaFunc `op`: grads[i] is d/d(output i) (zeros
 * where nothing reached it); sets input_grads[k] ({NULL} for no gradient). */
typedef mf_code (*mf_host_grad_fn)(void *ud, mf_graph *g, const mf_op *op, int64_t fn_id,
                                   const mf_output *grads, int ngrads, mf_output *input_grads,
                                   int ninputs, mf_status *s);
typedef struct mf_host {
  void *ud;                 /* passed to each callback */
  mf_host_call_fn call;     /* NULL: LuaFunc ops of the graph fail when run */
  mf_host_print_fn print;   /* NULL: Print writes to stderr */
  mf_host_grad_fn grad;     /* NULL: LuaFunc ops of the graph have no gradient */
} mf_host;
/* Copies *host into g (NULL clears it). Ops in function graphs (branches,
 * loop bodies) use their own graph's host, else that of the graph they run in. */
MF_API void mf_graph_set_host(mf_graph *g, const mf_host *host);
/* For callbacks: sets an error (code != MF_OK) with a message; returns code. */
MF_API mf_code mf_status_set_error(mf_status *s, mf_code code, const char *message);
/* How many times a Print, Assert or CheckNumerics op ran in sess (in any of
 * its runs, in functions too); 0 for other ops and after mf_session_close. */
MF_API int64_t mf_session_op_run_count(const mf_session *sess, const mf_op *op);
/* MF_CDEF_END */

/* --- op libraries: ops registered by a library loaded at run time --- */
/* Such a library (src/mpi/ builds libmoonflow_mpi.so) is compiled against
 * this tree's internal headers: its table (src/graph/op_def.h) holds one
 * registration per op, as the tables of src/ops/ do, and it calls the
 * engine through the functions declared here. */
typedef struct mf_op_table mf_op_table;
typedef struct mf_grad_ctx mf_grad_ctx;
/* Adds the table's ops to the registry; pass MF_VERSION as abi_version (a
 * library built for another version is FAILED_PRECONDITION). The table is
 * borrowed for the life of the process (the library is never unloaded).
 * Adding the same table again is no error; an op type already registered is
 * ALREADY_EXISTS and adds nothing. Safe from any thread. */
MF_API mf_code mf_registry_add(const mf_op_table *table, const char *abi_version, mf_status *s);
/* Sets code and a printf-formatted message; returns code. */
MF_API mf_code mf_status_set(mf_status *s, mf_code code, const char *fmt, ...) MF_PRINTF(3, 4);
/* Writes "[2,-1]" or "<unknown>" into buf; returns buf. */
MF_API char *mf_shape_str(const mf_shape *s, char *buf, size_t n);
/* Builders for gradient rules (src/graph/autodiff.c): they take and return
 * ports; a port whose .op is NULL (an earlier failure) makes them return one
 * too. begin gives NULL after a failure; finish returns output 0 and discards
 * d after a failure; rebuild builds `type` on the n inputs with every
 * attribute of the op being differentiated. */
MF_API mf_op_desc *mf_grad_begin(mf_grad_ctx *gc, const char *type);
MF_API mf_output mf_grad_finish(mf_grad_ctx *gc, mf_op_desc *d);
MF_API mf_output mf_grad_op1(mf_grad_ctx *gc, const char *type, mf_output a);
MF_API mf_output mf_grad_op2(mf_grad_ctx *gc, const char *type, mf_output a, mf_output b);
MF_API mf_output mf_grad_rebuild(mf_grad_ctx *gc, const char *type, const mf_output *inputs, int n);
/* For shape inference of an op with a variable number of outputs: makes room
 * for n (src/graph/op_def.h) and sets the count. */
typedef struct mf_infer_ctx mf_infer_ctx;
MF_API mf_code mf_infer_set_num_outputs(mf_infer_ctx *ic, int n);

#ifdef __cplusplus
}
#endif
#endif
