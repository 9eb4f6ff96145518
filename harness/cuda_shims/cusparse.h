/* Emulator shim (harness/cuda_shims/README.md): the cuSPARSE names torch's ATen/cuda headers use. */
#pragma once
typedef struct cusparseContext *cusparseHandle_t;
typedef enum {
  CUSPARSE_STATUS_SUCCESS = 0, CUSPARSE_STATUS_NOT_INITIALIZED = 1, CUSPARSE_STATUS_ALLOC_FAILED = 2,
  CUSPARSE_STATUS_INVALID_VALUE = 3, CUSPARSE_STATUS_ARCH_MISMATCH = 4, CUSPARSE_STATUS_EXECUTION_FAILED = 6,
  CUSPARSE_STATUS_INTERNAL_ERROR = 7, CUSPARSE_STATUS_NOT_SUPPORTED = 10
} cusparseStatus_t;
#ifdef __cplusplus
extern "C"
#endif
const char *cusparseGetErrorString(cusparseStatus_t status);
