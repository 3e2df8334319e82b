/* Fault injection for the tests: every MK_TEST_* hook of the executor, in
 * one place.  These are not error handling: each one deliberately breaks a
 * run the way a real fault would, so tests/mpi-fail.sh and tests/mpi-ckpt.sh
 * can check that the other ranks notice and nothing hangs or corrupts a file.
 * Unset (the default), every hook does nothing; every value is parsed by
 * one table (src/util/testenv.c), and merak refuses a bad one up front.
 *
 *   MK_TEST_FAIL=RANK:STEP    that rank exits with status 1 at the start of
 *                             that (0-based global) step: a dead rank.
 *   MK_TEST_STOP=RANK:STEP    that rank stops itself (SIGSTOP) there: a rank
 *                             that no longer answers (tests/mpi-timeout.sh).
 *   MK_TEST_NAN=STEP          the loss of that step reads NaN on every rank:
 *                             a diverged run.
 *   MK_TEST_GRAD_INF=RANK:STEP  that rank's gradients' sum of squares reads
 *                             inf at that step, as an overflowed fp16
 *                             gradient makes it: loss scaling must skip the
 *                             step on every rank alike.
 *   MK_TEST_SAVE_DIE_AFTER=N  rank 0 _exits with status 3 once it has written
 *                             N tensors of a checkpoint: a save killed midway.
 *   MK_TEST_DEVICE_FAIL=RANK:STEP  that rank's backend reports a device error
 *                             after that step (as a CUDA error would, through
 *                             mk_backend_t.status): every rank must stop alike.
 *
 * One hook lives outside the executor because sim and plan write files too:
 * MK_TEST_WRITE_PAUSE=S (src/util/fileio.c) holds a finished file S seconds before
 * its rename, for the signal-during-save tests. */
#include "config.h"
#include "exec/exec_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Nonzero when var holds RANK:STEP equal to rank and step (parsed as
 * merak's flags are: mk_test_env; garbage was refused before any work). */
static int at_rank_step(const char *var, int rank, int64_t step)
{
    int r;
    long long k;
    return mk_test_env(var, &r, &k) && r == rank && k == step;
}

void mk_fault_rank_step(int rank, int64_t step)
{
    if (at_rank_step("MK_TEST_FAIL", rank, step)) {
        mk_log("merak run: rank %d: testing: exiting at step %lld", rank, (long long)step);
        exit(1);
    }
    if (at_rank_step("MK_TEST_STOP", rank, step)) {
        mk_log("merak run: rank %d: testing: stopping (SIGSTOP) at step %lld", rank, (long long)step);
        raise(SIGSTOP);
    }
}

int mk_fault_device_armed(void)
{
    int r;
    long long k;
    return mk_test_env("MK_TEST_DEVICE_FAIL", &r, &k);
}

int mk_fault_device(int rank, int64_t step)
{
    if (!at_rank_step("MK_TEST_DEVICE_FAIL", rank, step)) return 0;
    return mk_error_set("testing: a device error after step %lld", (long long)step);
}

int mk_fault_grad_inf(int rank, int64_t step) { return at_rank_step("MK_TEST_GRAD_INF", rank, step); }

int mk_fault_nan(int64_t step)
{
    long long k;
    return mk_test_env("MK_TEST_NAN", NULL, &k) && k == step;
}

void mk_fault_save_written(int written)
{
    long long n;
    if (mk_test_env("MK_TEST_SAVE_DIE_AFTER", NULL, &n) && written >= n) {
        mk_log("merak run: testing: killed after writing %d tensors", written);
        _exit(3);
    }
}
