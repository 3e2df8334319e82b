/* The search over MPI ranks from a program linking libmerak
 * (mk_planner_search_mpi, <merak/run.h>) over a communicator of the
 * program's: under mpiexec -n 3 the world is split into ranks {0, 1} and
 * {2}, each group searches on its own, and each group's merged top K equals
 * one process's search of the whole space, plan by plan and step by step;
 * every rank of a group returns alike.  Run by tests/mpi-planner-lib.sh. */
#include "check.h"
#include "merak/run.h"

#include <mpi.h>
#include <string.h>

static int same_plan(const mk_plan_t *a, const mk_plan_t *b)
{
    return a->dp == b->dp && a->pp == b->pp && a->tp == b->tp && a->vpp == b->vpp && a->mbs == b->mbs &&
           a->schedule == b->schedule && a->recompute.kind == b->recompute.kind && a->zero == b->zero &&
           a->seqpar == b->seqpar && !strcmp(a->partition, b->partition);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int wrank, wsize, rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm group;
    MPI_Comm_split(MPI_COMM_WORLD, wrank < 2 ? 0 : 1, wrank, &group);
    MPI_Comm_rank(group, &rank);
    MPI_Comm_size(group, &size);
    mk_model_config_t m;
    mk_cluster_t c;
    CHECK(mk_model_preset("gpt2-124m", &m) == 0 && mk_cluster_get("dgx-a100", &c) == 0, "presets: %s", mk_error_last());
    mk_planner_opts_t o;
    mk_planner_opts_init(&o);
    o.gpus = 16, o.gbs = 64, o.top = 4, o.rank = rank, o.size = size;
    mk_planner_result_t r, one;
    int rc = mk_planner_search_mpi(&m, &c, &o, &group, &r);
    CHECK(rc == 0, "rank %d: mk_planner_search_mpi: %s", wrank, mk_error_last());
    CHECK(wsize == 3, "run under mpiexec -n 3 (size %d)", wsize);
    if (rank == 0 && rc == 0) {
        mk_planner_opts_t w = o;
        w.rank = 0, w.size = 1;
        CHECK(mk_planner_search(&m, &c, &w, &one) == 0, "one process: %s", mk_error_last());
        CHECK(r.n == one.n && r.n > 0, "group of rank %d: %d plans over %d ranks, %d in one process", wrank, r.n, size,
              one.n);
        for (int i = 0; i < r.n && i < one.n; i++) {
            CHECK(r.best[i].res.step_time_s == one.best[i].res.step_time_s, "#%d: %.9g s vs %.9g s", i + 1,
                  r.best[i].res.step_time_s, one.best[i].res.step_time_s);
            CHECK(same_plan(&r.best[i].plan, &one.best[i].plan), "#%d: another plan", i + 1);
        }
        CHECK(r.candidates == one.candidates, "candidates %ld over the ranks, %ld in one", r.candidates, one.candidates);
        mk_planner_result_free(&one);
    }
    mk_planner_result_free(&r);
    /* a bad search fails on every rank with the same message */
    o.gpus = 0;
    rc = mk_planner_search_mpi(&m, &c, &o, &group, &r);
    CHECK(rc < 0 && strstr(mk_error_last(), "--gpus"), "rank %d: a bad search: rc %d, %s", wrank, rc, mk_error_last());
    mk_planner_result_free(&r);
    MPI_Comm_free(&group);
    MPI_Finalize();
    CHECK_DONE();
}
