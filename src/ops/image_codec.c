/* image_codec.c — tf.image's codecs: PNG through libpng, JPEG through
 * libjpeg-turbo, and their ops DecodePng, EncodePng, DecodeJpeg, EncodeJpeg
 * and DecodeImage (PNG or JPEG by their first bytes). Images are uint8
 * [height, width, channels]; moonflow has no uint16, so 16-bit PNGs decode
 * to their high bytes, as TensorFlow's decode_png with dtype uint8 does.
 *
 * Both libraries report errors by calling back, and the callbacks here
 * longjmp to the function that started the work: everything that such a
 * function frees on the way out is set before its setjmp and never changed
 * after it, so nothing leaks and nothing is clobbered. Corrupt data is an
 * INVALID_ARGUMENT error naming the op and quoting the library. */
#include "ops/image_codec.h"
#include "core/status.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/tstring.h"
#include "core/shape.h"
#include "core/memory.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "kernels/helpers.h"
#include "exec/kernel_api.h"

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <png.h>
#include <jpeglib.h>
#include <jerror.h>

#define STRING_BIT (1u << MF_STRING)
#define UINT8_BIT (1u << MF_UINT8)

/* TensorFlow's bound on a decoded image, 2^29 bytes (its JPEG decoder's):
 * a few bytes of header cannot ask for more memory than that. */
static const int64_t MAX_IMAGE_BYTES = (int64_t)1 << 29;

/* Encoded bytes as they are written: a buffer that grows. */
typedef struct byte_sink {
  unsigned char *data;
  size_t size, cap;
  bool oom;
} byte_sink;

static void sink_put(byte_sink *k, const void *bytes, size_t n) {
  if (k->oom) return;
  if (k->size + n > k->cap) {
    size_t cap = k->cap ? k->cap : 4096;
    while (cap < k->size + n) cap *= 2;
    unsigned char *grown = mf_realloc(k->data, cap);
    if (!grown) {
      k->oom = true;
      return;
    }
    k->data = grown;
    k->cap = cap;
  }
  memcpy(k->data + k->size, bytes, n);
  k->size += n;
}

/* A failure inside either library: where to jump and what it said. */
typedef struct codec_failure {
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX > 200 ? JMSG_LENGTH_MAX : 200];
} codec_failure;

/* ---------- PNG ---------- */

static void png_failed(png_structp png, png_const_charp message) {
  codec_failure *f = png_get_error_ptr(png);
  snprintf(f->message, sizeof f->message, "%s", message);
  longjmp(f->jump, 1);
}

/* Warnings (a bad CRC in an ancillary chunk, an unknown chunk) are not
 * errors to TensorFlow either; they are dropped rather than printed. */
static void png_warned(png_structp png, png_const_charp message) {
  MF_UNUSED(png);
  MF_UNUSED(message);
}

static void png_write_to_sink(png_structp png, png_bytep data, size_t n) {
  byte_sink *k = png_get_io_ptr(png);
  sink_put(k, data, n);
  if (k->oom) png_error(png, "out of memory");
}

static void png_flush_nothing(png_structp png) { MF_UNUSED(png); }

mf_code mf_png_encode(const uint8_t *pixels, int64_t height, int64_t width, int64_t channels, int compression,
                      const char *op_name, unsigned char **png_out, size_t *size, mf_status *s) {
  static const int color_types[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                     PNG_COLOR_TYPE_RGB_ALPHA};
  *png_out = NULL;
  *size = 0;
  if (channels < 1 || channels > 4)
    return MF_INVALID(s, "%s: an image to encode as PNG has 1 to 4 channels, got %lld", op_name, (long long)channels);
  if (compression < -1 || compression > 9)
    return MF_INVALID(s, "%s: compression must be -1 (the default) or 0 to 9, got %d", op_name, compression);
  if (height < 1 || width < 1 || height > PNG_UINT_31_MAX || width > PNG_UINT_31_MAX)
    return MF_INVALID(s, "%s: a PNG image has 1 to 2^31 - 1 rows and columns, got %lld x %lld", op_name,
                      (long long)height, (long long)width);
  codec_failure failure;
  byte_sink sink = {0};
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &failure, png_failed, png_warned);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!info) {
    png_destroy_write_struct(&png, NULL);
    return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "%s: out of memory", op_name);
  }
  if (setjmp(failure.jump)) {
    png_destroy_write_struct(&png, &info);
    mf_free(sink.data);
    if (sink.oom) return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "%s: out of memory", op_name);
    return MF_INVALID(s, "%s: PNG encoding failed: %s", op_name, failure.message);
  }
  png_set_write_fn(png, &sink, png_write_to_sink, png_flush_nothing);
  png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, color_types[channels], PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (compression >= 0) png_set_compression_level(png, compression);
  png_write_info(png, info);
  size_t row_bytes = (size_t)width * (size_t)channels;
  for (int64_t r = 0; r < height; r++) png_write_row(png, pixels + (size_t)r * row_bytes);
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  *png_out = sink.data;
  *size = sink.size;
  return MF_OK;
}

/* PNG bytes read from a string. */
typedef struct byte_source {
  const unsigned char *data;
  size_t size, at;
} byte_source;

static void png_read_from_source(png_structp png, png_bytep out, size_t n) {
  byte_source *src = png_get_io_ptr(png);
  if (n > src->size - src->at) png_error(png, "the data ends too early (truncated)");
  memcpy(out, src->data + src->at, n);
  src->at += n;
}

/* Output i of ctx: a uint8 image [height, width, channels], NULL with the
 * status set when too large or out of memory. */
static uint8_t *alloc_image(mf_kernel_ctx *ctx, int64_t height, int64_t width, int64_t channels, const char *format) {
  if (height * width * channels >= MAX_IMAGE_BYTES) {
    MF_INVALID(ctx->status, "%s: the %s image is too large to decode: %lld x %lld x %lld bytes (at most 2^29)",
               ctx->op->name, format, (long long)height, (long long)width, (long long)channels);
    return NULL;
  }
  const int64_t dims[3] = {height, width, channels};
  mf_tensor *out = mf_kernel_alloc_output(ctx, 0, MF_UINT8, 3, dims);
  return out ? out->data : NULL;
}

/* Sets libpng's transformations that give `channels` samples of 8 bits
 * (0: as many as the file holds), as TensorFlow's png_io does; returns the
 * number of channels. */
static int png_transforms(png_structp png, png_infop info, int channels) {
  int color_type = png_get_color_type(png, info), bit_depth = png_get_bit_depth(png, info);
  bool has_trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  if (channels == 0)
    channels = color_type == PNG_COLOR_TYPE_PALETTE ? (has_trns ? 4 : 3) : png_get_channels(png, info);
  bool has_alpha = (color_type & PNG_COLOR_MASK_ALPHA) != 0;
  if (channels % 2 == 0) {
    if (!has_alpha && has_trns) png_set_tRNS_to_alpha(png);
    else if (!has_alpha) png_set_add_alpha(png, 0xff, PNG_FILLER_AFTER);
  } else if (has_alpha || has_trns) {
    png_set_strip_alpha(png);
  }
  if (bit_depth > 8) png_set_strip_16(png);
  png_set_packing(png);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  bool is_gray = (color_type & PNG_COLOR_MASK_COLOR) == 0;
  if (is_gray && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (channels < 3 && !is_gray) png_set_rgb_to_gray(png, 1, 0.299, 0.587);  /* ITU-R 601, as JPEG's */
  else if (channels >= 3 && is_gray) png_set_gray_to_rgb(png);
  return channels;
}

/* Decodes the PNG in contents into output 0 of ctx with `channels` channels. */
static mf_code decode_png(mf_kernel_ctx *ctx, const mf_tstring *contents, int channels) {
  codec_failure failure;
  byte_source src = {(const unsigned char *)mf_tstring_bytes(contents), (size_t)contents->length, 0};
  if (contents->length < 8 || png_sig_cmp(src.data, 0, 8))
    return MF_INVALID(ctx->status, "%s: the contents (%lld bytes) are not PNG data: no PNG signature",
                      ctx->op->name, (long long)contents->length);
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &failure, png_failed, png_warned);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!info) {
    png_destroy_read_struct(&png, NULL, NULL);
    return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  }
  if (setjmp(failure.jump)) {
    png_destroy_read_struct(&png, &info, NULL);
    if (!mf_ok(ctx->status)) return ctx->status->code;
    return MF_INVALID(ctx->status, "%s: invalid PNG data (%lld bytes): %s", ctx->op->name,
                      (long long)contents->length, failure.message);
  }
  png_set_read_fn(png, &src, png_read_from_source);
  png_read_info(png, info);
  int c = png_transforms(png, info, channels);
  int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  int64_t height = png_get_image_height(png, info), width = png_get_image_width(png, info);
  if ((int64_t)png_get_rowbytes(png, info) != width * c)
    png_error(png, "the decoded rows do not have the size asked for");
  uint8_t *pixels = alloc_image(ctx, height, width, c, "PNG");
  if (!pixels) png_error(png, "no image");  /* the status says why */
  for (int pass = 0; pass < passes; pass++)
    for (int64_t r = 0; r < height; r++) png_read_row(png, pixels + r * width * c, NULL);
  png_read_end(png, NULL);
  png_destroy_read_struct(&png, &info, NULL);
  return MF_OK;
}

/* ---------- JPEG ---------- */

/* libjpeg's error manager, with where to jump and whether the data ended early. */
typedef struct jpeg_failure {
  struct jpeg_error_mgr mgr;
  codec_failure f;
  bool truncated;
} jpeg_failure;

static void jpeg_failed(j_common_ptr cinfo) {
  jpeg_failure *jf = (jpeg_failure *)cinfo->err;
  cinfo->err->format_message(cinfo, jf->f.message);
  longjmp(jf->f.jump, 1);
}

/* Warnings about corrupt data are not errors (libjpeg recovers, and so does
 * TensorFlow), except that the data ended early; nothing is printed. */
static void jpeg_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) ((jpeg_failure *)cinfo->err)->truncated = true;
}

static void jpeg_failure_init(jpeg_failure *jf) {
  jpeg_std_error(&jf->mgr);
  jf->mgr.error_exit = jpeg_failed;
  jf->mgr.emit_message = jpeg_message;
  jf->truncated = false;
}

typedef struct jpeg_decode_options {
  int channels, ratio;
  bool fancy_upscaling, try_recover_truncated;
  J_DCT_METHOD dct_method;
} jpeg_decode_options;

static mf_code decode_jpeg(mf_kernel_ctx *ctx, const mf_tstring *contents, const jpeg_decode_options *o) {
  struct jpeg_decompress_struct cinfo;
  jpeg_failure jf;
  jpeg_failure_init(&jf);
  cinfo.err = &jf.mgr;
  jpeg_create_decompress(&cinfo);
  if (setjmp(jf.f.jump)) {
    jpeg_destroy_decompress(&cinfo);
    if (!mf_ok(ctx->status)) return ctx->status->code;
    if (jf.mgr.msg_code == JERR_NO_BACKING_STORE)  /* over max_memory_to_use */
      return MF_INVALID(ctx->status, "%s: the JPEG image is too large to decode: libjpeg would need more than "
                        "2^30 bytes", ctx->op->name);
    return MF_INVALID(ctx->status, "%s: invalid JPEG data (%lld bytes): %s", ctx->op->name,
                      (long long)contents->length, jf.f.message);
  }
  jpeg_mem_src(&cinfo, (const unsigned char *)mf_tstring_bytes(contents), (unsigned long)contents->length);
  jpeg_read_header(&cinfo, TRUE);
  int channels = o->channels ? o->channels : cinfo.jpeg_color_space == JCS_GRAYSCALE ? 1 : 3;
  cinfo.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  cinfo.scale_num = 1;
  cinfo.scale_denom = (unsigned)o->ratio;
  cinfo.do_fancy_upsampling = o->fancy_upscaling;
  cinfo.dct_method = o->dct_method;
  /* libjpeg's own buffers (a progressive image's coefficients) are bounded
   * too; the output is allocated before they are, once its size is known. */
  cinfo.mem->max_memory_to_use = 2 * MAX_IMAGE_BYTES;
  jpeg_calc_output_dimensions(&cinfo);
  int64_t height = cinfo.output_height, width = cinfo.output_width;
  if (cinfo.output_components != channels) ERREXIT(&cinfo, JERR_CONVERSION_NOTIMPL);
  uint8_t *pixels = alloc_image(ctx, height, width, channels, "JPEG");
  if (!pixels) ERREXIT(&cinfo, JERR_OUT_OF_MEMORY);  /* the status says why */
  jpeg_start_decompress(&cinfo);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = pixels + (int64_t)cinfo.output_scanline * width * channels;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  if (jf.truncated && !o->try_recover_truncated) {
    snprintf(jf.f.message, sizeof jf.f.message, "the data ends too early (truncated; try_recover_truncated "
                                                "decodes what there is)");
    longjmp(jf.f.jump, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return MF_OK;
}

/* libjpeg's destination: a sink, filled through a buffer of its own. */
typedef struct jpeg_sink {
  struct jpeg_destination_mgr mgr;
  byte_sink sink;
  JOCTET buffer[4096];
} jpeg_sink;

static void jpeg_sink_start(j_compress_ptr cinfo) {
  jpeg_sink *d = (jpeg_sink *)cinfo->dest;
  d->mgr.next_output_byte = d->buffer;
  d->mgr.free_in_buffer = sizeof d->buffer;
}

static boolean jpeg_sink_flush(j_compress_ptr cinfo) {
  jpeg_sink *d = (jpeg_sink *)cinfo->dest;
  sink_put(&d->sink, d->buffer, sizeof d->buffer);
  if (d->sink.oom) ERREXIT(cinfo, JERR_OUT_OF_MEMORY);
  jpeg_sink_start(cinfo);
  return TRUE;
}

static void jpeg_sink_end(j_compress_ptr cinfo) {
  jpeg_sink *d = (jpeg_sink *)cinfo->dest;
  sink_put(&d->sink, d->buffer, sizeof d->buffer - d->mgr.free_in_buffer);
  if (d->sink.oom) ERREXIT(cinfo, JERR_OUT_OF_MEMORY);
}

typedef struct jpeg_encode_options {
  int quality, density_unit, x_density, y_density;
  bool progressive, optimize_size, chroma_downsampling;
  const char *xmp_metadata;  /* "" for none */
} jpeg_encode_options;

/* XMP metadata goes in an APP1 marker after this namespace and its NUL, as
 * TensorFlow writes it; a marker holds at most 65533 bytes. */
static const char XMP_NAMESPACE[] = "http://ns.adobe.com/xap/1.0/";
enum { MAX_XMP = 65533 - (int)sizeof XMP_NAMESPACE };

/* The JPEG of pixels [height, width, channels (1 or 3)] in *sink (owned by the caller). */
static mf_code encode_jpeg(const uint8_t *pixels, int64_t height, int64_t width, int channels,
                           const jpeg_encode_options *o, const char *op_name, jpeg_sink *dest, mf_status *s) {
  struct jpeg_compress_struct cinfo;
  jpeg_failure jf;
  jpeg_failure_init(&jf);
  cinfo.err = &jf.mgr;
  jpeg_create_compress(&cinfo);
  if (setjmp(jf.f.jump)) {
    jpeg_destroy_compress(&cinfo);
    if (dest->sink.oom) return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "%s: out of memory", op_name);
    return MF_INVALID(s, "%s: JPEG encoding failed: %s", op_name, jf.f.message);
  }
  dest->mgr.init_destination = jpeg_sink_start;
  dest->mgr.empty_output_buffer = jpeg_sink_flush;
  dest->mgr.term_destination = jpeg_sink_end;
  cinfo.dest = &dest->mgr;
  cinfo.image_width = (JDIMENSION)width;
  cinfo.image_height = (JDIMENSION)height;
  cinfo.input_components = channels;
  cinfo.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  cinfo.optimize_coding = o->optimize_size;
  cinfo.density_unit = (UINT8)o->density_unit;
  cinfo.X_density = (UINT16)o->x_density;
  cinfo.Y_density = (UINT16)o->y_density;
  jpeg_set_quality(&cinfo, o->quality, TRUE);
  if (o->progressive) jpeg_simple_progression(&cinfo);
  if (!o->chroma_downsampling)
    for (int i = 0; i < cinfo.num_components; i++)
      cinfo.comp_info[i].h_samp_factor = cinfo.comp_info[i].v_samp_factor = 1;
  jpeg_start_compress(&cinfo, TRUE);
  size_t xmp = strlen(o->xmp_metadata);
  if (xmp) {
    jpeg_write_m_header(&cinfo, JPEG_APP0 + 1, (unsigned)(sizeof XMP_NAMESPACE + xmp));
    for (size_t i = 0; i < sizeof XMP_NAMESPACE; i++) jpeg_write_m_byte(&cinfo, XMP_NAMESPACE[i]);
    for (size_t i = 0; i < xmp; i++) jpeg_write_m_byte(&cinfo, (unsigned char)o->xmp_metadata[i]);
  }
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = (JSAMPROW)(pixels + (int64_t)cinfo.next_scanline * width * channels);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return MF_OK;
}

/* ---------- the ops ---------- */

/* Output i of ctx: the one string bytes[0..n). */
static mf_code set_string_output(mf_kernel_ctx *ctx, const void *bytes, size_t n) {
  mf_strings_builder b;
  mf_strings_builder_init(&b);
  mf_strings_add(&b, bytes, n);
  mf_tensor *t = mf_strings_finish(&b, 0, NULL, ctx->status);
  if (!t) return ctx->status->code;
  mf_tensor_release(ctx->outputs[0]);
  ctx->outputs[0] = t;
  return MF_OK;
}

/* The channels attr of a decoder: 0 (as in the file), 1, 3 or 4 (PNG only). */
static int channels_attr(const mf_attrs *attrs, const char *op_name, bool png, mf_status *s) {
  int64_t c = mf_attr_int(attrs, "channels", 0);
  if (c == 0 || c == 1 || c == 3 || (png && c == 4)) return (int)c;
  MF_INVALID(s, "%s: channels must be 0, 1, 3%s, got %lld", op_name, png ? " or 4" : " (JPEG)", (long long)c);
  return -1;
}

/* Decoders take a scalar string and give uint8 [height, width, channels]. */
static mf_code decode_infer(mf_infer_ctx *ic, bool png) {
  if (mf_check_dtype(ic, 0, "contents has", STRING_BIT)) return ic->status->code;
  char buf[128];
  if (ic->in_shapes[0].rank > 0)
    return MF_INVALID(ic->status, "%s: contents must be a scalar (one encoded image), got shape %s", ic->op_name,
                      mf_shape_str(&ic->in_shapes[0], buf, sizeof buf));
  mf_dtype t = mf_attr_type(ic->attrs, "dtype", MF_UINT8);
  if (t != MF_UINT8)
    return MF_INVALID(ic->status, "%s: dtype must be uint8, got %s (moonflow has no uint16)", ic->op_name,
                      mf_dtype_name(t));
  int channels = channels_attr(ic->attrs, ic->op_name, png, ic->status);
  if (channels < 0) return ic->status->code;
  const int64_t dims[3] = {-1, -1, channels ? channels : -1};
  ic->out_dtypes[0] = MF_UINT8;
  ic->out_shapes[0] = mf_shape_make(3, dims);
  return MF_OK;
}

static mf_code decode_png_infer(mf_infer_ctx *ic) { return decode_infer(ic, true); }
static mf_code decode_jpeg_infer(mf_infer_ctx *ic) {
  if (decode_infer(ic, false)) return ic->status->code;
  int64_t ratio = mf_attr_int(ic->attrs, "ratio", 1);
  if (ratio != 1 && ratio != 2 && ratio != 4 && ratio != 8)
    return MF_INVALID(ic->status, "%s: ratio must be 1, 2, 4 or 8, got %lld", ic->op_name, (long long)ratio);
  const mf_attr *dct = mf_attrs_find(ic->attrs, "dct_method", MF_ATTR_STRING);
  if (dct && strcmp(dct->v.s, "") && strcmp(dct->v.s, "INTEGER_FAST") && strcmp(dct->v.s, "INTEGER_ACCURATE"))
    return MF_INVALID(ic->status, "%s: dct_method must be \"\", \"INTEGER_FAST\" or \"INTEGER_ACCURATE\", got \"%s\"",
                      ic->op_name, dct->v.s);
  return MF_OK;
}

static mf_code decode_png_kernel(mf_kernel_ctx *ctx) {
  int channels = channels_attr(ctx->attrs, ctx->op->name, true, ctx->status);
  return decode_png(ctx, mf_strings_of(ctx->inputs[0]), channels);
}

/* TensorFlow's options; its default DCT ("") is libjpeg's fast integer one. */
static jpeg_decode_options jpeg_options_of(const mf_attrs *attrs, int channels) {
  const mf_attr *dct = mf_attrs_find(attrs, "dct_method", MF_ATTR_STRING);
  return (jpeg_decode_options){
      .channels = channels,
      .ratio = (int)mf_attr_int(attrs, "ratio", 1),
      .fancy_upscaling = mf_attr_bool(attrs, "fancy_upscaling", true),
      .try_recover_truncated = mf_attr_bool(attrs, "try_recover_truncated", false),
      .dct_method = dct && strcmp(dct->v.s, "INTEGER_ACCURATE") == 0 ? JDCT_ISLOW : JDCT_IFAST,
  };
}

static mf_code decode_jpeg_kernel(mf_kernel_ctx *ctx) {
  jpeg_decode_options o = jpeg_options_of(ctx->attrs, channels_attr(ctx->attrs, ctx->op->name, false, ctx->status));
  return decode_jpeg(ctx, mf_strings_of(ctx->inputs[0]), &o);
}

/* DecodeImage: PNG or JPEG, told apart by their signatures; GIF and BMP are
 * recognized only to say that moonflow does not decode them. */
static mf_code decode_image_kernel(mf_kernel_ctx *ctx) {
  const mf_tstring *contents = mf_strings_of(ctx->inputs[0]);
  const unsigned char *b = (const unsigned char *)mf_tstring_bytes(contents);
  int64_t n = contents->length;
  int channels = channels_attr(ctx->attrs, ctx->op->name, true, ctx->status);
  if (n >= 8 && png_sig_cmp(b, 0, 8) == 0) return decode_png(ctx, contents, channels);
  if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) {
    if (channels == 4)
      return MF_INVALID(ctx->status, "%s: channels 4 is for PNG; this is a JPEG image (channels 0, 1 or 3)",
                        ctx->op->name);
    jpeg_decode_options o = jpeg_options_of(ctx->attrs, channels);
    return decode_jpeg(ctx, contents, &o);
  }
  if ((n >= 3 && memcmp(b, "GIF", 3) == 0) || (n >= 2 && memcmp(b, "BM", 2) == 0))
    return MF_INVALID(ctx->status, "%s: %s images are not supported; moonflow decodes PNG and JPEG", ctx->op->name,
                      b[0] == 'G' ? "GIF" : "BMP");
  return MF_INVALID(ctx->status, "%s: Unknown image file format (%lld bytes): PNG or JPEG required", ctx->op->name,
                    (long long)n);
}

/* Encoders take uint8 [height, width, channels] and give a scalar string. */
static mf_code encode_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "image has", UINT8_BIT)) return ic->status->code;
  const mf_shape *in = &ic->in_shapes[0];
  char buf[128];
  if (in->rank >= 0 && in->rank != 3)
    return MF_INVALID(ic->status, "%s: image must be 3-dimensional [height, width, channels], got shape %s",
                      ic->op_name, mf_shape_str(in, buf, sizeof buf));
  ic->out_dtypes[0] = MF_STRING;
  ic->out_shapes[0] = mf_shape_make(0, NULL);
  return MF_OK;
}

static mf_code encode_png_infer(mf_infer_ctx *ic) {
  if (encode_infer(ic)) return ic->status->code;
  int64_t level = mf_attr_int(ic->attrs, "compression", -1);
  int64_t c = ic->in_shapes[0].rank == 3 ? ic->in_shapes[0].dims[2] : -1;
  if (level < -1 || level > 9)
    return MF_INVALID(ic->status, "%s: compression must be -1 (the default) or 0 to 9, got %lld", ic->op_name,
                      (long long)level);
  if (c == 0 || c > 4)
    return MF_INVALID(ic->status, "%s: image must have 1 to 4 channels, got %lld", ic->op_name, (long long)c);
  return MF_OK;
}

static mf_code encode_png_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  unsigned char *png;
  size_t size;
  if (mf_png_encode(in->data, in->dims[0], in->dims[1], in->dims[2],
                    (int)mf_attr_int(ctx->attrs, "compression", -1), ctx->op->name, &png, &size, ctx->status))
    return ctx->status->code;
  mf_code code = set_string_output(ctx, png, size);
  mf_free(png);
  return code;
}

/* EncodeJpeg's format attr: "" (by the channels), "grayscale" or "rgb";
 * returns the channels it takes (-1 when the attr is bad). */
static int jpeg_format_channels(const mf_attrs *attrs) {
  const mf_attr *format = mf_attrs_find(attrs, "format", MF_ATTR_STRING);
  if (!format || !format->v.s[0]) return 0;
  if (strcmp(format->v.s, "grayscale") == 0) return 1;
  if (strcmp(format->v.s, "rgb") == 0) return 3;
  return -1;
}

/* Checks EncodeJpeg's attrs and an image of c channels (-1: unknown) against them. */
static mf_code check_encode_jpeg(const mf_attrs *attrs, int64_t c, const char *op_name, mf_status *s) {
  int format = jpeg_format_channels(attrs);
  if (format < 0) return MF_INVALID(s, "%s: format must be \"\", \"grayscale\" or \"rgb\"", op_name);
  int64_t quality = mf_attr_int(attrs, "quality", 95);
  if (quality < 0 || quality > 100) return MF_INVALID(s, "%s: quality must be in [0,100], got %lld", op_name,
                                                      (long long)quality);
  const mf_attr *unit = mf_attrs_find(attrs, "density_unit", MF_ATTR_STRING);
  if (unit && strcmp(unit->v.s, "in") && strcmp(unit->v.s, "cm"))
    return MF_INVALID(s, "%s: density_unit must be \"in\" or \"cm\", got \"%s\"", op_name, unit->v.s);
  const mf_attr *xmp = mf_attrs_find(attrs, "xmp_metadata", MF_ATTR_STRING);
  if (xmp && strlen(xmp->v.s) > MAX_XMP)
    return MF_INVALID(s, "%s: xmp_metadata holds %zu bytes; a JPEG marker holds at most %d", op_name,
                      strlen(xmp->v.s), MAX_XMP);
  for (int k = 0; k < 2; k++) {
    int64_t d = mf_attr_int(attrs, k ? "y_density" : "x_density", 300);
    if (d < 0 || d > UINT16_MAX)
      return MF_INVALID(s, "%s: %s must be 0 to 65535, got %lld", op_name, k ? "y_density" : "x_density",
                        (long long)d);
  }
  if (c >= 0 && format == 0 && c != 1 && c != 3)
    return MF_INVALID(s, "%s: image must have 1 or 3 channels, got %lld", op_name, (long long)c);
  if (c >= 0 && format && c != format)
    return MF_INVALID(s, "%s: format \"%s\" takes images of %d channel%s, got %lld", op_name,
                      format == 1 ? "grayscale" : "rgb", format, format == 1 ? "" : "s", (long long)c);
  return MF_OK;
}

static mf_code encode_jpeg_infer(mf_infer_ctx *ic) {
  if (encode_infer(ic)) return ic->status->code;
  return check_encode_jpeg(ic->attrs, ic->in_shapes[0].rank == 3 ? ic->in_shapes[0].dims[2] : -1, ic->op_name,
                           ic->status);
}

static mf_code encode_jpeg_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  if (check_encode_jpeg(ctx->attrs, in->dims[2], ctx->op->name, ctx->status)) return ctx->status->code;
  if (in->dims[0] < 1 || in->dims[1] < 1 || in->dims[0] > JPEG_MAX_DIMENSION || in->dims[1] > JPEG_MAX_DIMENSION)
    return MF_INVALID(ctx->status, "%s: a JPEG image has 1 to %d rows and columns, got %lld x %lld", ctx->op->name,
                      (int)JPEG_MAX_DIMENSION, (long long)in->dims[0], (long long)in->dims[1]);
  const mf_attr *unit = mf_attrs_find(ctx->attrs, "density_unit", MF_ATTR_STRING);
  const mf_attr *xmp = mf_attrs_find(ctx->attrs, "xmp_metadata", MF_ATTR_STRING);
  jpeg_encode_options o = {
      .quality = (int)mf_attr_int(ctx->attrs, "quality", 95),
      .density_unit = unit && strcmp(unit->v.s, "cm") == 0 ? 2 : 1,
      .x_density = (int)mf_attr_int(ctx->attrs, "x_density", 300),
      .y_density = (int)mf_attr_int(ctx->attrs, "y_density", 300),
      .progressive = mf_attr_bool(ctx->attrs, "progressive", false),
      .optimize_size = mf_attr_bool(ctx->attrs, "optimize_size", false),
      .chroma_downsampling = mf_attr_bool(ctx->attrs, "chroma_downsampling", true),
      .xmp_metadata = xmp ? xmp->v.s : "",
  };
  jpeg_sink *dest = mf_calloc(1, sizeof *dest);
  if (!dest) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  mf_code code = encode_jpeg(in->data, in->dims[0], in->dims[1], (int)in->dims[2], &o, ctx->op->name, dest,
                             ctx->status);
  if (code == MF_OK) code = set_string_output(ctx, dest->sink.data, dest->sink.size);
  mf_free(dest->sink.data);
  mf_free(dest);
  return code;
}

#define DECODE_OP MF_OP_SETS_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE | MF_OP_STRINGS | MF_OP_DYNAMIC_OUTPUTS
#define ENCODE_OP MF_OP_SETS_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE | MF_OP_STRINGS
static const mf_op_def defs[] = {
    {.name = "DecodePng", .num_inputs = 1, .num_outputs = 1, .flags = DECODE_OP,
     .infer = decode_png_infer, .kernel = {[MF_CPU] = decode_png_kernel}},
    {.name = "DecodeJpeg", .num_inputs = 1, .num_outputs = 1, .flags = DECODE_OP,
     .infer = decode_jpeg_infer, .kernel = {[MF_CPU] = decode_jpeg_kernel}},
    {.name = "DecodeImage", .num_inputs = 1, .num_outputs = 1, .flags = DECODE_OP,
     .infer = decode_png_infer, .kernel = {[MF_CPU] = decode_image_kernel}},
    {.name = "EncodePng", .num_inputs = 1, .num_outputs = 1, .flags = ENCODE_OP,
     .infer = encode_png_infer, .kernel = {[MF_CPU] = encode_png_kernel}},
    {.name = "EncodeJpeg", .num_inputs = 1, .num_outputs = 1, .flags = ENCODE_OP,
     .infer = encode_jpeg_infer, .kernel = {[MF_CPU] = encode_jpeg_kernel}},
};
MF_OP_TABLE(mf_ops_image_codec, defs);
