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

/* The calling thread's launch setting (cuda_common.cuh, "launches"): per
 * host thread like the runtime's current device, so two backends with
 * different options on different threads do not meet. */
static thread_local bool launch_pdl = true;

bool ts_cuda_launch_pdl(void) { return launch_pdl; }

void ts_cuda_set_launch_pdl(bool on) { launch_pdl = on; }
