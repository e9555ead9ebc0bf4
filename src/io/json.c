/* json.c — JSON text read with Jansson for the Lua code that takes JSON
 * (HParams.parse_json), so no JSON is parsed by hand (issue 15).
 *
 * The document Jansson parses is copied into a tree of mf_json_value nodes
 * whose arrays and objects are indexed, so that a binding walks it with
 * plain calls (item i, key i) rather than Jansson's iterators. */
#include "core/status.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

struct mf_json_value {
  mf_json_type type;
  double number;
  char *text;                 /* STRING */
  size_t len;                 /* STRING: bytes; ARRAY, OBJECT: count */
  struct mf_json_value *items;
  char **keys;                /* OBJECT */
};

struct mf_json {
  mf_json_value root;
};

static void clear(mf_json_value *v) {
  for (size_t i = 0; v->items && i < v->len; i++) clear(&v->items[i]);
  for (size_t i = 0; v->keys && i < v->len; i++) free(v->keys[i]);
  free(v->items);
  free(v->keys);
  free(v->text);
}

static char *copy(const char *text, size_t len) {
  char *out = malloc(len + 1);
  if (out) {
    memcpy(out, text, len);
    out[len] = '\0';
  }
  return out;
}

/* Copies j into *v (zeroed first); false when out of memory (v then holds
 * what was copied, for clear). Jansson limits nesting, so the recursion is bounded. */
static bool convert(const json_t *j, mf_json_value *v) {
  memset(v, 0, sizeof *v);
  switch (json_typeof(j)) {
  case JSON_OBJECT: {
    v->type = MF_JSON_OBJECT;
    size_t n = json_object_size(j);
    v->items = calloc(n + 1, sizeof *v->items);
    v->keys = calloc(n + 1, sizeof *v->keys);
    if (!v->items || !v->keys) return false;
    const char *key;
    json_t *member;
    json_object_foreach((json_t *)j, key, member) {
      v->keys[v->len] = copy(key, strlen(key));
      v->len++;
      if (!v->keys[v->len - 1] || !convert(member, &v->items[v->len - 1])) return false;
    }
    return true;
  }
  case JSON_ARRAY: {
    v->type = MF_JSON_ARRAY;
    size_t n = json_array_size(j);
    v->items = calloc(n + 1, sizeof *v->items);
    if (!v->items) return false;
    for (; v->len < n; v->len++)
      if (!convert(json_array_get(j, v->len), &v->items[v->len])) {
        v->len++;
        return false;
      }
    return true;
  }
  case JSON_STRING:
    v->type = MF_JSON_STRING;
    v->len = json_string_length(j);
    v->text = copy(json_string_value(j), v->len);
    return v->text != NULL;
  case JSON_INTEGER:
    v->type = MF_JSON_INTEGER;
    v->number = (double)json_integer_value(j);
    return true;
  case JSON_REAL:
    v->type = MF_JSON_REAL;
    v->number = json_real_value(j);
    return true;
  case JSON_TRUE: v->type = MF_JSON_TRUE; return true;
  case JSON_FALSE: v->type = MF_JSON_FALSE; return true;
  case JSON_NULL: v->type = MF_JSON_NULL; return true;
  }
  return true;
}

mf_json *mf_json_parse(const char *text, size_t len, mf_status *s) {
  json_error_t err;
  json_t *doc = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
  if (!doc) {
    mf_code code = json_error_code(&err) == json_error_out_of_memory ? MF_RESOURCE_EXHAUSTED : MF_INVALID_ARGUMENT;
    mf_status_set(s, code, "line %d column %d (char %d): %s", err.line, err.column, err.position, err.text);
    return NULL;
  }
  mf_json *out = calloc(1, sizeof *out);
  if (!out || !convert(doc, &out->root)) {
    if (out) clear(&out->root);
    free(out);
    json_decref(doc);
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory reading JSON of %zu bytes", len);
    return NULL;
  }
  json_decref(doc);
  return out;
}

void mf_json_free(mf_json *j) {
  if (!j) return;
  clear(&j->root);
  free(j);
}

const mf_json_value *mf_json_root(const mf_json *j) { return &j->root; }
mf_json_type mf_json_type_of(const mf_json_value *v) { return v->type; }

double mf_json_number(const mf_json_value *v) {
  return v->type == MF_JSON_INTEGER || v->type == MF_JSON_REAL ? v->number : 0;
}

const char *mf_json_string(const mf_json_value *v, size_t *len) {
  if (v->type != MF_JSON_STRING) return NULL;
  if (len) *len = v->len;
  return v->text;
}

size_t mf_json_length(const mf_json_value *v) {
  return v->type == MF_JSON_ARRAY || v->type == MF_JSON_OBJECT ? v->len : 0;
}

const mf_json_value *mf_json_item(const mf_json_value *v, size_t i) {
  return (v->type == MF_JSON_ARRAY || v->type == MF_JSON_OBJECT) && i < v->len ? &v->items[i] : NULL;
}

const char *mf_json_key(const mf_json_value *v, size_t i, size_t *len) {
  if (v->type != MF_JSON_OBJECT || i >= v->len) return NULL;
  if (len) *len = strlen(v->keys[i]);
  return v->keys[i];
}
