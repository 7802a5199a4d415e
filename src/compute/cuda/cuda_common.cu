/* Device queries shared by the launchers. */
#include "compute/cuda/cuda_common.cuh"

ts_status ts_cuda_device_count(int *n) {
    *n = 0;
    int c = 0;
    cudaError_t e = cudaGetDeviceCount(&c);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
        (void)cudaGetLastError(); /* not sticky, but keep the next launch check clean */
        return TS_OK;
    }
    TS_CUDA_CHECK(e);
    *n = c;
    return TS_OK;
}

ts_status ts_cuda_sm_count(int *n) {
    /* attribute queries are legal during stream capture and cost well under a
     * microsecond, so nothing is cached (a cache would be shared mutable state) */
    int dev = 0;
    TS_CUDA_CHECK(cudaGetDevice(&dev));
    TS_CUDA_CHECK(cudaDeviceGetAttribute(n, cudaDevAttrMultiProcessorCount, dev));
    return TS_OK;
}
