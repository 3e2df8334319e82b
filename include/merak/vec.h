/* MK_VEC: a loop function vectorised.  GCC's -O2 cost model declines every
 * loop whose trip count is unknown (sqrtf: -fno-math-errno, Makefile.am);
 * this asks for it, with an AVX2 clone picked at load time where the CPU
 * has it (the default build must run on any x86-64).  -std=c11 means
 * -ffp-contract=off: no FMA contraction, so every clone rounds each
 * element as the scalar loop does and the results are bitwise those of
 * the plain loop.  Elsewhere (clang, other targets) it is nothing. */
#ifndef MERAK_VEC_H
#define MERAK_VEC_H
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define MK_VEC __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic"), \
                              target_clones("avx2", "default")))
#else
#define MK_VEC
#endif
#endif
