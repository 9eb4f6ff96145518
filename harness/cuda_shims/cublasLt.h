/* Emulator shim (harness/cuda_shims/README.md): the cuBLASLt names torch's ATen/cuda headers use. */
#pragma once
#include <cublas_v2.h>
typedef struct cublasLtContext *cublasLtHandle_t;
