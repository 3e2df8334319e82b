/* An MPI profiling shim (LD_PRELOAD) for tests/mpi-staged.sh: the MPI
 * calls the executor makes refuse a buffer that lies in a "device"
 * allocation of the staged cpu backend (MK_TEST_STAGED=1: memfd mappings
 * named mk-staged-device, src/cpu/backend_cpu.c), as MPI without CUDA
 * support cannot read a GPU's memory.  A refused call prints one line
 * naming the call and aborts the rank.  Each wrapper checks its buffers
 * against /proc/self/maps and forwards to PMPI_. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* nonzero when p lies in a mapping whose name holds mk-staged-device */
static int on_device(const void *p)
{
    if (!p || p == MPI_IN_PLACE) return 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return 0;
    char line[512];
    uintptr_t a = (uintptr_t)p;
    int hit = 0;
    while (!hit && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi) hit = strstr(line, "mk-staged-device") != NULL;
    }
    fclose(f);
    return hit;
}

static void guard(const char *call, const void *a, const void *b)
{
    if (!on_device(a) && !on_device(b)) return;
    fprintf(stderr, "mpi_guard: %s was handed a device buffer (%p, %p)\n", call, a, b);
    fflush(stderr);
    abort();
}

int MPI_Isend(const void *buf, int n, MPI_Datatype t, int dst, int tag, MPI_Comm c, MPI_Request *r)
{
    guard("MPI_Isend", buf, NULL);
    return PMPI_Isend(buf, n, t, dst, tag, c, r);
}

int MPI_Irecv(void *buf, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request *r)
{
    guard("MPI_Irecv", buf, NULL);
    return PMPI_Irecv(buf, n, t, src, tag, c, r);
}

int MPI_Iallreduce(const void *s, void *d, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request *r)
{
    guard("MPI_Iallreduce", s, d);
    return PMPI_Iallreduce(s, d, n, t, op, c, r);
}

int MPI_Ireduce(const void *s, void *d, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c, MPI_Request *r)
{
    guard("MPI_Ireduce", s, d);
    return PMPI_Ireduce(s, d, n, t, op, root, c, r);
}

int MPI_Ireduce_scatter(const void *s, void *d, const int cnt[], MPI_Datatype t, MPI_Op op, MPI_Comm c,
                        MPI_Request *r)
{
    guard("MPI_Ireduce_scatter", s, d);
    return PMPI_Ireduce_scatter(s, d, cnt, t, op, c, r);
}

int MPI_Ireduce_scatter_block(const void *s, void *d, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request *r)
{
    guard("MPI_Ireduce_scatter_block", s, d);
    return PMPI_Ireduce_scatter_block(s, d, n, t, op, c, r);
}

int MPI_Iallgather(const void *s, int sn, MPI_Datatype st, void *d, int dn, MPI_Datatype dt, MPI_Comm c,
                   MPI_Request *r)
{
    guard("MPI_Iallgather", s, d);
    return PMPI_Iallgather(s, sn, st, d, dn, dt, c, r);
}

int MPI_Iallgatherv(const void *s, int sn, MPI_Datatype st, void *d, const int cnt[], const int dsp[],
                    MPI_Datatype dt, MPI_Comm c, MPI_Request *r)
{
    guard("MPI_Iallgatherv", s, d);
    return PMPI_Iallgatherv(s, sn, st, d, cnt, dsp, dt, c, r);
}

int MPI_Ibcast(void *buf, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *r)
{
    guard("MPI_Ibcast", buf, NULL);
    return PMPI_Ibcast(buf, n, t, root, c, r);
}

int MPI_Ialltoall(const void *s, int sn, MPI_Datatype st, void *d, int dn, MPI_Datatype dt, MPI_Comm c,
                  MPI_Request *r)
{
    guard("MPI_Ialltoall", s, d);
    return PMPI_Ialltoall(s, sn, st, d, dn, dt, c, r);
}

int MPI_Ialltoallv(const void *s, const int sc[], const int sd[], MPI_Datatype st, void *d, const int dc[],
                   const int dd[], MPI_Datatype dt, MPI_Comm c, MPI_Request *r)
{
    guard("MPI_Ialltoallv", s, d);
    return PMPI_Ialltoallv(s, sc, sd, st, d, dc, dd, dt, c, r);
}
