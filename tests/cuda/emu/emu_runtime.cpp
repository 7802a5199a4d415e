/* The CUDA runtime API and cuBLAS calls the kernels and tests use, on host
 * memory, for the CPU emulation (emu.h). Launches run synchronously, so every
 * "asynchronous" call is complete when it returns. cublasGemmEx is a plain
 * float-accumulating loop over F16/BF16 inputs (the operation, not its speed). */
#include <cublas_v2.h>
#include <stdlib.h>

#include "emu.h"

extern "C" {

cudaError_t cudaMalloc(void **p, size_t n) {
    /* exact size, so AddressSanitizer sees any access past it */
    return posix_memalign(p, 256, n ? n : 1) == 0 ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void *p) {
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) {
    memmove(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) {
    if (emu::recording) emu::recording->push_back([=] { memmove(d, s, n); });
    else memmove(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaMemset(void *d, int v, size_t n) {
    memset(d, v, n);
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t) { return "emulated error"; }
const char *cudaGetErrorName(cudaError_t) { return "cudaErrorEmulated"; }
cudaError_t cudaGetDeviceCount(int *n) {
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d) {
    *d = 0;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int) {
    *v = a == cudaDevAttrMultiProcessorCount ? 132 : 0;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
    memset(p, 0, sizeof *p);
    strcpy(p->name, "CPU emulation (tests/cuda/emu)");
    p->major = 9, p->minor = 0, p->multiProcessorCount = 132, p->l2CacheSize = 60 << 20;
    p->totalGlobalMem = (size_t)8 << 30;
    return cudaSuccess;
}
/* what the engine's backend (backend_cuda.cu) adds: one device, streams that
 * are complete at once, pinned memory as plain memory */
cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
    *s = (cudaStream_t)malloc(1);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    free((void *)s);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned) { return cudaMalloc(p, n); }
cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }
cudaError_t cudaHostGetDevicePointer(void **d, void *h, unsigned) {
    *d = h;
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t) {
    if (emu::recording) emu::recording->push_back([=] { memset(d, v, n); });
    else memset(d, v, n);
    return cudaSuccess;
}
/* graphs: a graph and its instance are both the recorded closures */
cudaError_t cudaStreamBeginCapture(cudaStream_t, enum cudaStreamCaptureMode) {
    if (emu::recording) return cudaErrorIllegalState;
    emu::recording = new emu::Recording();
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t *g) {
    if (!emu::recording) return cudaErrorIllegalState;
    *g = (cudaGraph_t)emu::recording;
    emu::recording = nullptr;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long) {
    *x = (cudaGraphExec_t) new emu::Recording(*(emu::Recording *)g);
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    delete (emu::Recording *)g;
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) {
    delete (emu::Recording *)x;
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t) {
    for (auto &f : *(emu::Recording *)x) f();
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *fr, size_t *tot) {
    *tot = (size_t)8 << 30;
    *fr = (size_t)4 << 30;
    return cudaSuccess;
}
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, const void *) {
    memset(a, 0, sizeof *a);
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) {
    *e = (cudaEvent_t)malloc(1);
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    free((void *)e);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; } /* one host thread runs everything in order */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t, cudaEvent_t) {
    *ms = 0;
    return cudaSuccess;
}

struct cublasContext {
    int dummy;
};
cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
    *h = new cublasContext();
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
const char *cublasGetStatusString(cublasStatus_t) { return "emulated cuBLAS status"; }

static float ld_elem(const void *p, size_t i, cudaDataType_t t) {
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    uint16_t h;
    memcpy(&h, (const uint8_t *)p + 2 * i, 2);
    if (t == CUDA_R_16F) return __half2float(__ushort_as_half(h));
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Column-major C (m x n, ldc) = alpha op(A) op(B) + beta C, op(A) = A^T
 * (A: k x m, lda), op(B) = B (k x n, ldb): the only form gemm.cu uses. */
cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType_t at, int lda, const void *B,
                            cudaDataType_t bt, int ldb, const void *beta, void *C, cudaDataType_t ct, int ldc,
                            cublasComputeType_t, cublasGemmAlgo_t) {
    if (ta != CUBLAS_OP_T || tb != CUBLAS_OP_N || ct != CUDA_R_32F || at != bt) return CUBLAS_STATUS_NOT_SUPPORTED;
    const float al = *(const float *)alpha, be = *(const float *)beta;
    float *c = (float *)C;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float s = 0;
            for (int l = 0; l < k; l++) s += ld_elem(A, (size_t)i * lda + l, at) * ld_elem(B, (size_t)j * ldb + l, bt);
            float *o = c + (size_t)j * ldc + i;
            *o = al * s + (be != 0.0f ? be * *o : 0.0f);
        }
    return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
