/* Emulator shim (harness/cuda_shims/README.md): the cuSOLVER dense names torch's ATen/cuda headers use. */
#pragma once
#include <cusolver_common.h>
typedef struct cusolverDnContext *cusolverDnHandle_t;
