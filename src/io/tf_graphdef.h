/* tf_graphdef.h — what TensorFlow's GraphDef writer (tf_graphdef_write.c)
 * and reader (tf_graphdef_read.c) share: the table of ops, one row per op,
 * both ways (tf_graphdef_ops.c, which says why moonflow's ops and
 * TensorFlow's differ), the words of its entries, dtypes and the counting of
 * op types for the errors that list them. */
#ifndef MF_IO_TF_GRAPHDEF_H
#define MF_IO_TF_GRAPHDEF_H

#include "core/status.h"
#include "proto/graph.pb-c.h"

typedef struct mf_gd_importer mf_gd_importer;
/* Builds the moonflow ops of TensorFlow node `node` (inputs resolved in `in`)
 * and sets its output ports; the last op it builds takes the node's name. */
typedef mf_code mf_gd_expand_fn(mf_gd_importer *im, const Tensorflow__NodeDef *node, const mf_output *in, int n_in);

typedef struct mf_gd_row {
  const char *mf, *tf; /* the op type in moonflow and in TensorFlow (mf NULL: tf is expanded on import) */
  /* TensorFlow's type attributes, moonflow infers them: "T=0" is the dtype of
   * input 0 (-1: the last input), "dtype=out" of output 0, "N=n" the number of
   * moonflow inputs, "shape=outshape" the static shape of output 0. Not read
   * on import, except those marked "!": written only when the op has no such
   * attribute, and read as any other. */
  const char *types;
  /* moonflow attributes TensorFlow takes as constant inputs after the others,
   * in order, "attr:tf_input_name" (":2": an int32 matrix of rows of 2). */
  const char *consts;
  /* "mf_attr:tf_attr" renames; "mf_attr=value:" a moonflow attribute that
   * TensorFlow has not, exported only when it has another value (an error);
   * ":tf_attr" one that moonflow has not, skipped on import. */
  const char *renames;
  mf_gd_expand_fn *expand;
} mf_gd_row;

/* The expansions (tf_graphdef_read.c). */
mf_gd_expand_fn mf_gd_expand_log_softmax, mf_gd_expand_batch_norm;

/* The row of a moonflow op type (the first, for export), or of a TensorFlow one; NULL if none. */
const mf_gd_row *mf_gd_row_for_mf(const char *type);
const mf_gd_row *mf_gd_row_for_tf(const char *type);
/* The words of a row's entries: the next space-separated word of *list into
 * word (at most size - 1 bytes), false at the end; whether word "a:b" or
 * "a=v:b" has side (0: before the colon, without "=v"; 1: after it) equal to
 * name; the number of words. */
bool mf_gd_next_word(const char **list, char *word, size_t size);
bool mf_gd_side_is(const char *word, int side, const char *name);
int mf_gd_count_words(const char *list);
/* dtypes: TensorFlow's of a moonflow dtype (DT_INVALID if none), moonflow's
 * of TensorFlow's (false if none), TensorFlow's name of one ("DT_HALF", or
 * its number in buf). */
Tensorflow__DataType mf_gd_tf_dtype(mf_dtype t);
bool mf_gd_mf_dtype(Tensorflow__DataType t, mf_dtype *out);
const char *mf_gd_dtype_name(Tensorflow__DataType t, char *buf, size_t size);
/* Counts type into the first-seen list types/counts (*n of them; the lists
 * are the caller's to free), false when out of memory; and writes "Type
 * (count), ..." of them into out. */
bool mf_gd_count_type(const char ***types, int **counts, int *n, const char *type);
void mf_gd_list_types(char *out, size_t size, const char *const *types, const int *counts, int n);

#endif
