// Device discovery for the CUDA backend.  Linked into every build made with
// CUDA; on a machine without a driver cudaGetDeviceCount fails and we
// report zero devices rather than an error.
#include "merak/cuda.h"

#include <cuda_runtime.h>
#include <string.h>

extern "C" int mk_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); // clear the sticky "no driver" error
        return 0;
    }
    return n;
}

extern "C" int mk_cuda_device_name(int i, char *buf, int n)
{
    cudaDeviceProp p;
    if (n < 1 || cudaGetDeviceProperties(&p, i) != cudaSuccess) return -1;
    strncpy(buf, p.name, n - 1);
    buf[n - 1] = '\0';
    return 0;
}
