/* image_codec.h — the PNG encoder of image_codec.c (libpng), for kernels
 * that write images besides EncodePng (TensorBoard's ImageSummary). */
#ifndef MF_OPS_IMAGE_CODEC_H
#define MF_OPS_IMAGE_CODEC_H

#include "core/base.h"

/* PNG bytes of an 8-bit image: height rows of width pixels of channels
 * samples (1 gray, 2 gray + alpha, 3 RGB, 4 RGBA), row after row.
 * compression is zlib's level, 0 to 9, or -1 for libpng's default. On
 * success *png is a new buffer of *size bytes, owned by the caller (free
 * with mf_free); on failure *png is NULL and s says why, naming op_name. */
mf_code mf_png_encode(const uint8_t *pixels, int64_t height, int64_t width, int64_t channels, int compression,
                      const char *op_name, unsigned char **png, size_t *size, mf_status *s);

#endif
