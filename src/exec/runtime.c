/* Placement: hwloc binding, OpenBLAS threads, polite waiting (comm.h). */
#include "config.h"
#include "exec/comm.h"
#include "merak/backend.h"
#include "merak/exec.h"

#include <hwloc.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
void openblas_set_num_threads(int);
#endif

int mk_runtime_bind(mk_comm_t *c)
{
    MPI_Comm node;
    int lrank, lsize, threads = 1;
    MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &lrank);
    MPI_Comm_size(node, &lsize);
    MPI_Comm_free(&node);
    /* a device backend: one device per rank, from the node-local rank
       (before the backend's first allocation creates its context) */
    if (c->be && c->be->bind) c->be->bind(c->be->ctx, lrank, lsize);
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) < 0) return 1;
    hwloc_topology_load(topo);
    int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    if (cores < 1) cores = 1;
    c->polite = lsize > cores;
    if (lsize <= cores) {
        /* a contiguous share of cores per rank, bound */
        int share = cores / lsize, first = lrank * share;
        hwloc_bitmap_t set = hwloc_bitmap_alloc();
        for (int i = 0; i < share; i++) {
            hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, first + i);
            if (core && core->cpuset) hwloc_bitmap_or(set, set, core->cpuset);
        }
        if (!hwloc_bitmap_iszero(set)) hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_PROCESS);
        hwloc_bitmap_free(set);
        threads = share;
    }
    hwloc_topology_destroy(topo);
    /* activations come and go every micro-batch: keep freed blocks in the
       heap instead of returning them to the kernel (the page faults cost
       more than the GEMMs at small batch: 3.8 s -> 2.3 s per gpt2-124m step) */
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, -1);
    const char *env = getenv("OPENBLAS_NUM_THREADS");
    int cores_mine = threads;
    if (env && atoi(env) > 0) threads = atoi(env);
    /* the kernels' own threads: never more than the rank's cores; they
       also split the GEMMs (gemm_cpu.c), so OpenBLAS runs one thread
       (its idle workers would spin on those cores between GEMMs) */
    c->kernel_threads = threads < cores_mine ? threads : cores_mine;
    if (c->be && c->be->set_threads) c->be->set_threads(c->be->ctx, c->kernel_threads);
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    openblas_set_num_threads(1);
#endif
    return threads;
}

int mk_exec_bind(void *mpi_comm, struct mk_backend *be, int *kernel_threads)
{
    mk_comm_t c;
    memset(&c, 0, sizeof c);
    c.world = *(MPI_Comm *)mpi_comm;
    MPI_Comm_rank(c.world, &c.rank);
    MPI_Comm_size(c.world, &c.size);
    c.be = be;
    int threads = mk_runtime_bind(&c);
    if (kernel_threads) *kernel_threads = c.kernel_threads;
    return threads;
}
