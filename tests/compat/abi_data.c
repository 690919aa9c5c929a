#include "abi_data.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64
#define GUARD_BYTE 0x5A
#define FRESH_BYTE 0xA5

size_t abi_type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* abi_type_name(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
      return "int8";
    case ncclUint8:
      return "uint8";
    case ncclInt32:
      return "int32";
    case ncclUint32:
      return "uint32";
    case ncclInt64:
      return "int64";
    case ncclUint64:
      return "uint64";
    case ncclFloat16:
      return "float16";
    case ncclBfloat16:
      return "bfloat16";
    case ncclFloat32:
      return "float32";
    case ncclFloat64:
      return "float64";
    case ncclFloat8e4m3:
      return "float8e4m3";
    case ncclFloat8e5m2:
      return "float8e5m2";
    default:
      return "?";
  }
}

const char* abi_red_name(abi_red_t r) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}

int abi_type_is_float(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat32 || t == ncclFloat64 ||
         t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}

static int is_unsigned(ncclDataType_t t) {
  return t == ncclUint8 || t == ncclUint32 || t == ncclUint64;
}

static int is_fp8(ncclDataType_t t) { return t == ncclFloat8e4m3 || t == ncclFloat8e5m2; }

ncclRedOp_t abi_builtin_op(abi_red_t r) {
  switch (r) {
    case ABI_SUM:
      return ncclSum;
    case ABI_PROD:
      return ncclProd;
    case ABI_MAX:
      return ncclMax;
    case ABI_MIN:
      return ncclMin;
    case ABI_AVG:
      return ncclAvg;
    default:
      return ncclNumOps; /* not a built-in */
  }
}

/* ---- codecs ---- */

static double decode_half(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

static uint16_t encode_half(double d) {
  float f = (float)d;
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u;
  int exp = (int)((x >> 23) & 0xff);
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
  int e = exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    int shift = 14 - e;
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (h & 1))) ++h;
    return (uint16_t)(sign | h);
  }
  uint32_t h = sign | ((uint32_t)e << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return (uint16_t)h;
}

static double decode_bf16(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

static uint16_t encode_bf16(double d) {
  float f = (float)d;
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  if (isnan(f)) return 0x7fc0;
  x += 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

static double decode_e4m3(uint8_t b) {
  int e = (b >> 3) & 15, m = b & 7;
  double v = (e == 15 && m == 7) ? NAN : e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
  return (b & 0x80) ? -v : v;
}

static double decode_e5m2(uint8_t b) {
  int e = (b >> 2) & 31, m = b & 3;
  double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -16) : ldexp(4 + m, e - 17);
  return (b & 0x80) ? -v : v;
}

/* Nearest finite code (ties to the even code): 256 candidates. */
static uint8_t encode_fp8(ncclDataType_t t, double d) {
  int best = 0;
  double best_err = INFINITY;
  for (int c = 0; c < 256; ++c) {
    double v = t == ncclFloat8e4m3 ? decode_e4m3((uint8_t)c) : decode_e5m2((uint8_t)c);
    if (!isfinite(v)) continue;
    double err = fabs(v - d);
    if (err < best_err || (err == best_err && (c & 1) == 0 && (best & 1))) {
      best = c;
      best_err = err;
    }
  }
  return (uint8_t)best;
}

double abi_load(ncclDataType_t t, const void* base, size_t i) {
  switch (t) {
    case ncclInt8:
      return ((const int8_t*)base)[i];
    case ncclUint8:
      return ((const uint8_t*)base)[i];
    case ncclInt32:
      return ((const int32_t*)base)[i];
    case ncclUint32:
      return ((const uint32_t*)base)[i];
    case ncclInt64:
      return (double)((const int64_t*)base)[i];
    case ncclUint64:
      return (double)((const uint64_t*)base)[i];
    case ncclFloat16:
      return decode_half(((const uint16_t*)base)[i]);
    case ncclBfloat16:
      return decode_bf16(((const uint16_t*)base)[i]);
    case ncclFloat32:
      return ((const float*)base)[i];
    case ncclFloat64:
      return ((const double*)base)[i];
    case ncclFloat8e4m3:
      return decode_e4m3(((const uint8_t*)base)[i]);
    case ncclFloat8e5m2:
      return decode_e5m2(((const uint8_t*)base)[i]);
    default:
      return NAN;
  }
}

void abi_store(ncclDataType_t t, void* base, size_t i, double v) {
  switch (t) {
    case ncclInt8:
      ((int8_t*)base)[i] = (int8_t)llrint(v);
      break;
    case ncclUint8:
      ((uint8_t*)base)[i] = (uint8_t)llrint(v);
      break;
    case ncclInt32:
      ((int32_t*)base)[i] = (int32_t)llrint(v);
      break;
    case ncclUint32:
      ((uint32_t*)base)[i] = (uint32_t)llrint(v);
      break;
    case ncclInt64:
      ((int64_t*)base)[i] = (int64_t)llrint(v);
      break;
    case ncclUint64:
      ((uint64_t*)base)[i] = (uint64_t)llrint(v);
      break;
    case ncclFloat16:
      ((uint16_t*)base)[i] = encode_half(v);
      break;
    case ncclBfloat16:
      ((uint16_t*)base)[i] = encode_bf16(v);
      break;
    case ncclFloat32:
      ((float*)base)[i] = (float)v;
      break;
    case ncclFloat64:
      ((double*)base)[i] = v;
      break;
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      ((uint8_t*)base)[i] = encode_fp8(t, v);
      break;
    default:
      break;
  }
}

/* ---- reduction data ---- */

static unsigned mix(unsigned x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

static unsigned hash3(size_t i, int rank, unsigned salt) {
  return mix((unsigned)i * 0x9E3779B1U ^ mix((unsigned)(rank + 1) * 0x85EBCA77U ^ salt));
}

/* Small integers: with up to 4 ranks every partial sum, product and
 * pre-multiplied value is exact in every datatype (fp8 included: the tests
 * use it for sum, prod, max and min only). */
double abi_red_input(ncclDataType_t t, abi_red_t r, int rank, int nranks, size_t i, unsigned salt) {
  unsigned h = hash3(i, rank, salt + (unsigned)r * 1000u);
  switch (r) {
    case ABI_PROD: {
      static const int s[3] = {-1, 1, 2};
      return is_unsigned(t) ? 1 + (int)(h % 2) : s[h % 3];
    }
    case ABI_MAX:
    case ABI_MIN:
      if (is_fp8(t)) return h % 9;
      return is_unsigned(t) ? (double)(h % 201) : (double)(h % 101) - 50;
    case ABI_AVG:
      /* n * y: the average sum(y) is an integer. */
      return (double)nranks * (is_unsigned(t) ? (double)(h % 5) : (double)(h % 7) - 3);
    case ABI_SUM:
    case ABI_PREMUL:
    default:
      if (is_fp8(t)) return h % 3;
      return is_unsigned(t) ? (double)(h % 5) : (double)(h % 7) - 3;
  }
}

double abi_red_expected_over(ncclDataType_t t, abi_red_t r, const int* members, int nmembers,
                             size_t i, unsigned salt, double* sumabs) {
  double acc = 0, abs_acc = 0;
  for (int k = 0; k < nmembers; ++k) {
    double v = abi_red_input(t, r, members[k], nmembers, i, salt);
    abs_acc += fabs(v);
    if (k == 0) {
      acc = v;
      continue;
    }
    switch (r) {
      case ABI_PROD:
        acc *= v;
        break;
      case ABI_MAX:
        acc = v > acc ? v : acc;
        break;
      case ABI_MIN:
        acc = v < acc ? v : acc;
        break;
      default:
        acc += v;
        break;
    }
  }
  if (r == ABI_AVG) acc /= nmembers;
  if (r == ABI_PREMUL) acc *= ABI_PREMUL_SCALAR;
  if (sumabs) *sumabs = abs_acc;
  return acc;
}

void abi_fill_red(ncclDataType_t t, abi_red_t r, int rank, int nranks, void* base, size_t count,
                  size_t first, unsigned salt) {
  for (size_t k = 0; k < count; ++k)
    abi_store(t, base, k, abi_red_input(t, r, rank, nranks, first + k, salt));
}

static double type_eps(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16:
      return ldexp(1, -10);
    case ncclBfloat16:
      return ldexp(1, -7);
    case ncclFloat32:
      return ldexp(1, -23);
    case ncclFloat64:
      return ldexp(1, -52);
    case ncclFloat8e4m3:
      return ldexp(1, -3);
    case ncclFloat8e5m2:
      return ldexp(1, -2);
    default:
      return 0;
  }
}

static _Thread_local char g_msg[512];

const char* abi_check_red_over(ncclDataType_t t, abi_red_t r, const int* members, int nmembers,
                               const void* base, size_t count, size_t first, unsigned salt) {
  size_t bad = 0, first_bad = 0;
  double got0 = 0, want0 = 0;
  for (size_t k = 0; k < count; ++k) {
    double sumabs = 0;
    double want = abi_red_expected_over(t, r, members, nmembers, first + k, salt, &sumabs);
    double got = abi_load(t, base, k);
    /* Exact, except an average of floats may be an ulp or so off (a rounded
     * 1/n pre-multiplied). */
    double tol = (r == ABI_AVG && abi_type_is_float(t)) ? type_eps(t) * (sumabs + fabs(want)) : 0;
    if (!(fabs(got - want) <= tol)) {
      if (bad == 0) {
        first_bad = k;
        got0 = got;
        want0 = want;
      }
      ++bad;
    }
  }
  if (bad == 0) return NULL;
  snprintf(g_msg, sizeof g_msg,
           "%s %s: element %zu (of %zu) is %.9g, expected %.9g; %zu element(s) wrong",
           abi_red_name(r), abi_type_name(t), first_bad, count, got0, want0, bad);
  return g_msg;
}

const char* abi_check_red(ncclDataType_t t, abi_red_t r, int nranks, const void* base, size_t count,
                          size_t first, unsigned salt) {
  int members[64];
  for (int k = 0; k < nranks && k < 64; ++k) members[k] = k;
  return abi_check_red_over(t, r, members, nranks, base, count, first, salt);
}

/* ---- byte patterns ---- */

static unsigned char pattern_byte(int src, int dst, unsigned salt, size_t i) {
  return (unsigned char)(mix((unsigned)i * 0x9E3779B1U ^
                             mix((unsigned)src * 1000003U ^ (unsigned)dst * 7919U ^ salt)) >>
                         7);
}

void abi_fill_pattern(void* base, size_t bytes, int src, int dst, unsigned salt) {
  unsigned char* p = (unsigned char*)base;
  for (size_t i = 0; i < bytes; ++i) p[i] = pattern_byte(src, dst, salt, i);
}

const char* abi_check_pattern(const void* base, size_t bytes, int src, int dst, unsigned salt) {
  const unsigned char* p = (const unsigned char*)base;
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < bytes; ++i)
    if (p[i] != pattern_byte(src, dst, salt, i)) {
      if (bad++ == 0) first_bad = i;
    }
  if (bad == 0) return NULL;
  snprintf(g_msg, sizeof g_msg,
           "byte %zu (of %zu) is 0x%02x, expected 0x%02x (data from rank %d to rank %d); %zu "
           "byte(s) wrong",
           first_bad, bytes, p[first_bad], pattern_byte(src, dst, salt, first_bad), src, dst, bad);
  return g_msg;
}

/* ---- guarded buffers ---- */

void* abi_alloc(size_t bytes) {
  unsigned char* p = (unsigned char*)malloc(bytes + 2 * GUARD);
  if (p == NULL) {
    fprintf(stderr, "abi_alloc: out of memory (%zu bytes)\n", bytes);
    abort();
  }
  memset(p, GUARD_BYTE, GUARD);
  memset(p + GUARD, FRESH_BYTE, bytes);
  memset(p + GUARD + bytes, GUARD_BYTE, GUARD);
  return p + GUARD;
}

void abi_free(void* p, size_t bytes) {
  (void)bytes;
  if (p) free((unsigned char*)p - GUARD);
}

const char* abi_check_guards(const void* p, size_t bytes) {
  const unsigned char* b = (const unsigned char*)p;
  for (int i = 1; i <= GUARD; ++i)
    if (b[-i] != GUARD_BYTE) {
      snprintf(g_msg, sizeof g_msg, "written %d byte(s) before the buffer", i);
      return g_msg;
    }
  for (int i = 0; i < GUARD; ++i)
    if (b[bytes + (size_t)i] != GUARD_BYTE) {
      snprintf(g_msg, sizeof g_msg, "written %d byte(s) past the end of the %zu-byte buffer", i + 1,
               bytes);
      return g_msg;
    }
  return NULL;
}

const char* abi_check_untouched(const void* p, size_t bytes) {
  const unsigned char* b = (const unsigned char*)p;
  for (size_t i = 0; i < bytes; ++i)
    if (b[i] != FRESH_BYTE) {
      snprintf(g_msg, sizeof g_msg, "byte %zu of %zu was written (0x%02x)", i, bytes, b[i]);
      return g_msg;
    }
  return NULL;
}
