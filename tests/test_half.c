/* 16-bit rounding (merak/half.h) against references that round by
 * distance: the two neighbours of x among the 16-bit values (computed
 * here from the formats' definitions, in double, where every float and
 * every midpoint is exact), the nearer taken, a tie to the even one, and
 * past the largest finite value the next power of two standing for
 * infinity (IEEE's overflow rule).  Every bfloat16 with the low halves
 * that decide ties, every fp16 midpoint and its neighbours, and a million
 * random floats each; and the 16-bit sums (mk_*_add_n), two million pairs
 * each against their exact sum rounded the same way. */
#include "check.h"
#include "merak/half.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static float f_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint32_t u_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* |value| of the 16-bit pattern h (sign dropped), or 2^e_inf past the largest */
static double bf16_mag(uint32_t h)
{
    int e = h >> 7 & 255, m = h & 127;
    if (e == 255) return ldexp(1, 128);
    return e ? ldexp(m | 128, e - 134) : ldexp(m, -133);
}

static uint16_t bf16_ref(float x)
{
    uint32_t sign = u_of(x) >> 31 << 15, t = u_of(x) >> 16 & 0x7fff; /* truncated toward zero */
    if (isinf(x)) return (uint16_t)(sign | 0x7f80);
    double a = fabs((double)x), lo = bf16_mag(t), hi = bf16_mag(t + 1);
    double dl = a - lo, dh = hi - a;
    uint32_t r = dl < dh ? t : dh < dl ? t + 1 : (t & 1 ? t + 1 : t);
    return (uint16_t)(sign | r);
}

static double fp16_val[0x7c01]; /* every finite non-negative fp16, then 65536 for infinity */

static void fp16_table(void)
{
    for (int h = 0; h < 0x7c00; h++) {
        int e = h >> 10, m = h & 1023;
        fp16_val[h] = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    }
    fp16_val[0x7c00] = 65536;
}

static uint16_t fp16_ref_d(double x)
{
    double a = fabs(x);
    uint16_t sign = (uint16_t)(signbit(x) ? 0x8000 : 0);
    if (a >= 65536) return sign | 0x7c00;
    int lo = 0, hi = 0x7c00; /* fp16_val[lo] <= a < fp16_val[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (fp16_val[mid] <= a) lo = mid;
        else hi = mid;
    }
    double dl = a - fp16_val[lo], dh = fp16_val[hi] - a;
    int r = dl < dh ? lo : dh < dl ? hi : (lo & 1 ? hi : lo);
    return (uint16_t)(sign | r);
}

static uint16_t fp16_ref(float x) { return fp16_ref_d((double)x); }

/* bfloat16 of a double, by distance: the neighbours found by bisection
 * over the patterns (bf16_mag is increasing), 2^128 standing for infinity */
static uint16_t bf16_ref_d(double x)
{
    double a = fabs(x);
    uint16_t sign = (uint16_t)(signbit(x) ? 0x8000 : 0);
    if (a >= ldexp(1, 128)) return sign | 0x7f80;
    uint32_t lo = 0, hi = 0x7f80;
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (bf16_mag(mid) <= a) lo = mid;
        else hi = mid;
    }
    double dl = a - bf16_mag(lo), dh = bf16_mag(hi) - a;
    uint32_t r = dl < dh ? lo : dh < dl ? hi : (lo & 1 ? hi : lo);
    return (uint16_t)(sign | r);
}

static uint32_t rng = 12345;
static uint32_t next_u32(void)
{
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return rng;
}

static long bad_bf16, bad_fp16, n_bf16, n_fp16;

/* The 16-bit sums (a reduction's, rounded after each addition) against
 * the exact sum rounded by distance: the two values' sum in double is
 * exact where TwoSum's error term is 0 (every fp16 pair: their sum needs
 * at most 52 bits), the pairs checked; 0 + 0 of either sign aside.  The
 * pairs go through mk_*_add_n in batches (its vector path) and one by one
 * (its scalar tail). */
enum { BATCH = 4099 }; /* not a multiple of 8: a tail too */
static long bad_add, n_add;
static uint16_t add_a[2][BATCH], add_b[2][BATCH], add_want[2][BATCH];
static int add_n[2];

static void flush_adds(int bf)
{
    int n = add_n[bf];
    uint16_t got[BATCH];
    memcpy(got, add_a[bf], n * sizeof *got);
    if (bf) mk_bf16_add_n(got, add_b[bf], (size_t)n);
    else mk_fp16_add_n(got, add_b[bf], (size_t)n);
    for (int i = 0; i < n; i++) {
        uint16_t one = add_a[bf][i];
        if (bf) mk_bf16_add_n(&one, &add_b[bf][i], 1);
        else mk_fp16_add_n(&one, &add_b[bf][i], 1);
        if ((got[i] != add_want[bf][i] || one != add_want[bf][i]) && bad_add++ < 5)
            fprintf(stderr, "%s add %04x + %04x: %04x (batch), %04x (alone), the reference %04x\n", bf ? "bf16" : "fp16",
                    add_a[bf][i], add_b[bf][i], got[i], one, add_want[bf][i]);
    }
    add_n[bf] = 0;
}

static void check_add(uint16_t a, uint16_t b, int bf)
{
    float (*wide)(uint16_t) = bf ? mk_bf16_to_float : mk_fp16_to_float;
    double x = wide(a), y = wide(b), s = x + y, bb = s - x, err = (x - (s - bb)) + (y - bb);
    if (isnan(s) || isinf(x) || isinf(y) || err != 0 || s == 0) return;
    int i = add_n[bf]++;
    add_a[bf][i] = a, add_b[bf][i] = b, add_want[bf][i] = bf ? bf16_ref_d(s) : fp16_ref_d(s);
    n_add++;
    if (add_n[bf] == BATCH) flush_adds(bf);
}

/* Random pairs, and pairs near each other in magnitude (where the sums'
 * ties and carries are), both signs; fp16's overflow to infinity. */
static uint32_t next_u32(void);
static void check_adds(void)
{
    for (int i = 0; i < 1000000; i++) {
        uint16_t a = (uint16_t)next_u32(), d = (uint16_t)(next_u32() % 4096), s = (uint16_t)(next_u32() & 0x8000);
        for (int bf = 0; bf < 2; bf++) {
            check_add(a, (uint16_t)next_u32(), bf);
            check_add(a, (uint16_t)(((a & 0x7fff) + d - 2048) & 0x7fff) | s, bf);
        }
    }
    flush_adds(0), flush_adds(1);
    uint16_t h[9], sixteen[9], one = 0x3c00, inf = 0x7c00, ninf = 0xfc00;
    for (int i = 0; i < 9; i++) h[i] = 0x7bff, sixteen[i] = 0x4c00;
    mk_fp16_add_n(h, sixteen, 9); /* 65504 + 16 = 65520: the tie past the largest rounds to infinity */
    CHECK(h[0] == 0x7c00 && h[8] == 0x7c00, "fp16 sum 65504 + 16: %04x %04x, not infinity", h[0], h[8]);
    h[0] = 0x7bff, mk_fp16_add_n(h, &one, 1);
    CHECK(h[0] == 0x7bff, "fp16 sum 65504 + 1: %04x", h[0]);
    h[0] = inf, mk_fp16_add_n(h, &ninf, 1);
    CHECK(isnan(mk_fp16_to_float(h[0])), "fp16 sum inf + -inf: %04x, not a NaN", h[0]);
    CHECK(bad_add == 0, "16-bit sums: %ld of %ld differ from the exact sum rounded to nearest even", bad_add, n_add);
}

/* The fp16 array conversions (8 at a time where the CPU converts: half.c)
 * against the scalar functions, bit for bit: every 16-bit pattern widened
 * in one call, and a million floats (random bits, fp16's midpoints and
 * their neighbours, its range's edges) narrowed and rounded in calls of
 * BATCH. */
static void check_arrays(void)
{
    static uint16_t all[0x10000], back[0x10000];
    static float wide[0x10000], xs[BATCH], r[BATCH];
    long bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) all[h] = (uint16_t)h;
    mk_fp16_to_float_n(wide, all, 0x10000);
    for (uint32_t h = 0; h < 0x10000; h++) {
        float want = mk_fp16_to_float((uint16_t)h);
        bad += isnan(want) ? !isnan(wide[h]) : memcmp(&wide[h], &want, sizeof want) != 0;
    }
    mk_fp16_from_float_n(back, wide, 0x10000); /* NaNs keep their payload's top bits: the scalar rule */
    for (uint32_t h = 0; h < 0x10000; h++) bad += back[h] != mk_fp16_from_float(wide[h]);
    for (int k = 0; k < 250; k++) {
        for (int i = 0; i < BATCH; i++) {
            int h = (int)(next_u32() % 0x7c00);
            float mid = (float)((fp16_val[h] + fp16_val[h + 1]) / 2);
            float pick[5] = {f_of(next_u32()), mid, nextafterf(mid, 0), nextafterf(mid, INFINITY), 65520.0f};
            xs[i] = pick[next_u32() % 5] * (next_u32() & 1 ? -1.0f : 1.0f);
        }
        uint16_t hs[BATCH];
        mk_fp16_from_float_n(hs, xs, BATCH);
        mk_fp16_round_n(r, xs, BATCH);
        for (int i = 0; i < BATCH; i++) {
            uint16_t want = mk_fp16_from_float(xs[i]);
            float wr = mk_fp16_to_float(want);
            bad += hs[i] != want || (isnan(wr) ? !isnan(r[i]) : memcmp(&r[i], &wr, sizeof wr) != 0);
        }
    }
    CHECK(bad == 0, "fp16 array conversions: %ld values differ from the scalar rule", bad);
}

/* The array rounding (the GEMMs' operands) gives the scalar rule's value, bit for bit. */
static long bad_round;
static void check_round(float x)
{
    float r, want = mk_bf16_to_float(mk_bf16_from_float(x)), r16, want16 = mk_fp16_to_float(mk_fp16_from_float(x));
    mk_bf16_round_n(&r, &x, 1), mk_fp16_round_n(&r16, &x, 1);
    if ((memcmp(&r, &want, sizeof r) || memcmp(&r16, &want16, sizeof r)) && bad_round++ < 5)
        fprintf(stderr, "round_n(%a): %a %a, the scalar rule %a %a\n", x, r, r16, want, want16);
    /* the packed forms (16-bit activations): the scalar bits, widened back to the rounded value */
    uint16_t hb, hf;
    float wb, wf;
    mk_bf16_from_float_n(&hb, &x, 1), mk_fp16_from_float_n(&hf, &x, 1);
    mk_bf16_to_float_n(&wb, &hb, 1), mk_fp16_to_float_n(&wf, &hf, 1);
    if ((hb != mk_bf16_from_float(x) || hf != mk_fp16_from_float(x) || memcmp(&wb, &want, sizeof wb) ||
         memcmp(&wf, &want16, sizeof wf)) && bad_round++ < 5)
        fprintf(stderr, "from_float_n / to_float_n(%a): %04x %04x -> %a %a\n", x, hb, hf, wb, wf);
}

static void check_bf16(float x)
{
    n_bf16++;
    check_round(x);
    if (isnan(x)) {
        bad_bf16 += !isnan(mk_bf16_to_float(mk_bf16_from_float(x)));
        return;
    }
    if (mk_bf16_from_float(x) != bf16_ref(x) && bad_bf16++ < 5)
        fprintf(stderr, "bf16(%a): %04x, the reference %04x\n", x, mk_bf16_from_float(x), bf16_ref(x));
}

static void check_fp16(float x)
{
    n_fp16++;
    if (isnan(x)) {
        bad_fp16 += !isnan(mk_fp16_to_float(mk_fp16_from_float(x)));
        return;
    }
    if (mk_fp16_from_float(x) != fp16_ref(x) && bad_fp16++ < 5)
        fprintf(stderr, "fp16(%a): %04x, the reference %04x\n", x, mk_fp16_from_float(x), fp16_ref(x));
}

int main(void)
{
    fp16_table();
    static const uint32_t low[] = {0, 1, 0x7fff, 0x8000, 0x8001, 0xffff};
    for (uint32_t h = 0; h < 0x10000; h++)
        for (size_t i = 0; i < sizeof low / sizeof low[0]; i++) check_bf16(f_of(h << 16 | low[i]));
    for (int h = 0; h < 0x7c00; h++) { /* midpoints and their float neighbours, both signs */
        float mid = (float)((fp16_val[h] + fp16_val[h + 1]) / 2);
        float xs[] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY), (float)fp16_val[h]};
        for (int i = 0; i < 4; i++) check_fp16(xs[i]), check_fp16(-xs[i]);
    }
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = next_u32();
        check_bf16(f_of(u)), check_fp16(f_of(u));
        /* fp16's range, log-uniform: 2^-30 .. 2^17 */
        check_fp16((float)ldexp(1 + (next_u32() & 0xffffff) / 16777216.0, (int)(next_u32() % 48) - 30));
    }
    check_adds();
    check_arrays();
    CHECK(bad_bf16 == 0, "bfloat16: %ld of %ld differ from rounding to the nearest, ties to even", bad_bf16, n_bf16);
    CHECK(bad_fp16 == 0, "fp16: %ld of %ld differ from rounding to the nearest, ties to even", bad_fp16, n_fp16);
    CHECK(bad_round == 0, "the array rounding and packing: %ld values differ from the scalar rule", bad_round);
    /* widening is exact, and narrowing it back is the identity */
    long wide = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float b = mk_bf16_to_float((uint16_t)h), f = mk_fp16_to_float((uint16_t)h);
        int fin = (h & 0x7c00) != 0x7c00;
        wide += u_of(b) != h << 16;
        if (fin) wide += (double)f != (h & 0x8000 ? -fp16_val[h & 0x7fff] : fp16_val[h & 0x7fff]) ||
                         mk_fp16_from_float(f) != h;
    }
    CHECK(wide == 0, "widening: %ld values wrong", wide);
    CHECK(mk_fp16_from_float(65519.99f) == 0x7bff && mk_fp16_from_float(65520.0f) == 0x7c00, "fp16 overflow");
    CHECK(mk_bf16_from_float(-0.0f) == 0x8000 && mk_fp16_from_float(-0.0f) == 0x8000, "signed zero");
    printf("bfloat16: %ld values, fp16: %ld values rounded as the reference rounds them; %ld 16-bit sums\n", n_bf16,
           n_fp16, n_add);
    CHECK_DONE();
}
