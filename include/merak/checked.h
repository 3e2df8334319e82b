/* Checked 64-bit size arithmetic: every product of user-facing sizes
 * (layers x width, dp x mbs, tokens x vocabulary, ...) goes through these,
 * so a huge input gives an error naming the limit instead of a wrapped
 * int.  Each returns 0 and stores the result, or -1 on overflow (then
 * *out is unspecified). */
#ifndef MERAK_CHECKED_H
#define MERAK_CHECKED_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline int mk_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

static inline int mk_add_i64(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

/* Product of n sizes if it is at most max (an overflow counts as above);
 * on -1, *out is max + 1 or more (INT64_MAX on overflow), so a caller can
 * still print "more than max". */
static inline int mk_prod_within(const int64_t *v, int n, int64_t max, int64_t *out)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        if (mk_mul_i64(p, v[i], &p) < 0) {
            *out = INT64_MAX;
            return -1;
        }
    *out = p;
    return p <= max ? 0 : -1;
}

/* mk_prod_within over a literal list: MK_PROD_WITHIN(max, &out, a, b, c). */
#define MK_PROD_WITHIN(max, out, ...)                                                  \
    mk_prod_within((const int64_t[]){__VA_ARGS__},                                     \
                   (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (max), (out))

#ifdef __cplusplus
}
#endif
#endif
