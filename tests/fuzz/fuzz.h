/* Fuzz harnesses for the file readers (tests/fuzz/README.md).
 *
 * Each harness defines one reader function that takes the input bytes,
 * writes them to a file (the readers take paths, as the CLI gives them)
 * and runs the library calls the CLI makes on such a file.  The same
 * object links into a libFuzzer binary (`make fuzz`, clang) and into the
 * plain corpus replay (tests/fuzz/replay.c, `make check`, any compiler). */
#ifndef MERAK_FUZZ_H
#define MERAK_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* What the reader returned for the last input: 0 accepted, -1 rejected. */
extern int mk_fuzz_rc;
/* Where a harness puts figures that need computing, not checking. */
extern volatile double mk_fuzz_sink;

/* The per-process scratch folder (created on first use, removed at exit). */
const char *mk_fuzz_dir(void);
/* Write the input to NAME inside the scratch folder; returns its path.
 * The suffix of NAME matters to some readers (data files, clusters). */
const char *mk_fuzz_file(const char *name, const uint8_t *data, size_t size);
/* Remove the scratch folder and whatever a crashed run left in it. */
void mk_fuzz_cleanup(void);
/* A rejection must come with a message (mk_error_last) for the CLI to
 * print; anything else than 0/-1 or a silent -1 aborts, so that libFuzzer
 * and the replay both report it. */
void mk_fuzz_check(int rc);
/* Forget the previous input's message (so a silent -1 shows). */
void mk_fuzz_clear(void);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The libFuzzer entry point around a harness's reader function. */
#define MK_FUZZ_HARNESS(reader)                                        \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)       \
    {                                                                  \
        mk_fuzz_clear();                                               \
        mk_fuzz_rc = reader(data, size);                               \
        mk_fuzz_check(mk_fuzz_rc);                                     \
        return 0;                                                      \
    }

#endif
