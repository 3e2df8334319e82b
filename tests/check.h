/* Minimal checks for C tests: count failures, print each, exit 1 if any. */
#ifndef MK_TESTS_CHECK_H
#define MK_TESTS_CHECK_H
#include <math.h>
#include <stdio.h>

static int mk_check_failures = 0;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            mk_check_failures++;                                           \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

/* |got - want| <= rel * |want| */
#define CHECK_REL(got, want, rel, what)                                    \
    do {                                                                   \
        double g_ = (got), w_ = (want);                                    \
        CHECK(fabs(g_ - w_) <= (rel) * fabs(w_), "%s: got %.10g want %.10g (rel err %.3g)", \
              what, g_, w_, w_ != 0 ? fabs(g_ - w_) / fabs(w_) : fabs(g_)); \
    } while (0)

#define CHECK_DONE()                                                       \
    do {                                                                   \
        if (mk_check_failures) {                                           \
            fprintf(stderr, "%d check(s) failed\n", mk_check_failures);    \
            return 1;                                                      \
        }                                                                  \
        printf("all checks passed\n");                                     \
        return 0;                                                          \
    } while (0)
#endif
