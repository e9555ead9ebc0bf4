/* string_hash.h — the hashes of TensorFlow's string bucketing ops
 * (string_hash.c): FarmHash's Fingerprint64 and SipHash-2-4. Both are fixed
 * algorithms whose values are part of saved models (bucketed features), so
 * they must give TensorFlow's numbers bit for bit. */
#ifndef MF_CORE_STRING_HASH_H
#define MF_CORE_STRING_HASH_H

#include "core/base.h"

/* FarmHash's Fingerprint64 (its "na" Hash64) of s[0..n): StringToHashBucketFast. */
uint64_t mf_fingerprint64(const char *s, size_t n);
/* SipHash-2-4 of s[0..n) under the 128-bit key {key[0], key[1]}: StringToHashBucketStrong. */
uint64_t mf_siphash24(const uint64_t key[2], const char *s, size_t n);

#endif
