/* crc32c.h — CRC-32C (Castagnoli), the checksum of TFRecord framing (crc32c.c):
 * the SSE4.2 instruction where the CPU has it, else a table. */
#ifndef MF_IO_CRC32C_H
#define MF_IO_CRC32C_H

#include "core/base.h"

/* The CRC-32C of n bytes at data continuing crc (0 to start). */
uint32_t mf_crc32c_extend(uint32_t crc, const void *data, size_t n);
/* TFRecord stores CRCs masked (rotated right by 15, plus a constant), since a
 * CRC of data that holds CRCs is weak. */
static inline uint32_t mf_crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

#endif
