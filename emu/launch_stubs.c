/* Stand-ins for the CUDA runtime entry points that the CuTe DSL's exported host code imports.
 *
 * Built by emu/launch.py together with the object file that `export_to_c` writes; nothing here touches a
 * GPU. Every call is recorded so that Python can read back what the real host code asked for: the module
 * image (cudaLibraryLoadData), the kernel name (cudaLibraryGetKernel), the function attributes it set, and
 * the launch (cudaLaunchKernelEx: grid, block, dynamic shared memory, launch attributes, parameter bytes).
 * Struct layouts follow the CUDA runtime API headers (driver_types.h: cudaLaunchConfig_st,
 * cudaLaunchAttribute_st = {id; pad to 8; union value of 64 bytes}).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

typedef struct { unsigned x, y, z; } emu_dim3;
typedef struct {
    int id;
    char pad[4];
    unsigned char val[64];
} emu_launch_attr;
typedef struct {
    emu_dim3 grid;
    emu_dim3 block;
    size_t dynamic_smem;
    void *stream;
    emu_launch_attr *attrs;
    unsigned num_attrs;
} emu_launch_config;

#define EMU_MAX_PARAMS 64
#define EMU_MAX_PARAM_BYTES 65536
#define EMU_MAX_LOG 256

/* ---- what Python sets before the call */
int emu_num_params = 0;
int emu_param_sizes[EMU_MAX_PARAMS];
int emu_device_attr_values[256];      /* cudaDeviceGetAttribute answers, by attribute id (-1: unknown) */
int emu_kernel_attr_values[64];       /* cuKernelGetAttribute answers, by attribute id (-1: unknown) */

/* ---- what the stubs record */
const void *emu_library_data = 0;
int emu_library_loads = 0;
char emu_kernel_name[4096];
int emu_launches = 0;
emu_dim3 emu_grid, emu_block;
size_t emu_dynamic_smem = 0;
unsigned emu_num_attrs = 0;
emu_launch_attr emu_attrs[16];
unsigned char emu_param_bytes[EMU_MAX_PARAM_BYTES];
const void *emu_launch_func = 0;
char emu_log[EMU_MAX_LOG][160];
int emu_log_len = 0;
char emu_error[4096];

static void emu_note(const char *fmt, long a, long b, long c) {
    if (emu_log_len < EMU_MAX_LOG) {
        snprintf(emu_log[emu_log_len], sizeof emu_log[0], fmt, a, b, c);
        emu_log_len++;
    }
}

void emu_reset(void) {
    emu_launches = 0;
    emu_log_len = 0;
    emu_error[0] = 0;
    emu_num_attrs = 0;
    memset(emu_param_bytes, 0, sizeof emu_param_bytes);
}

/* ---- CUDA runtime stand-ins (the DSL runtime's underscore-prefixed wrappers have the runtime's signatures) */
#define KERNEL_HANDLE ((void *)0x4b45524eUL)
#define LIBRARY_HANDLE ((void *)0x4c494252UL)

int _cudaLibraryLoadData(void **library, const void *code, void *jit_options, void **jit_values,
                         unsigned num_jit, void *lib_options, void **lib_values, unsigned num_lib) {
    emu_library_data = code;
    emu_library_loads++;
    *library = LIBRARY_HANDLE;
    emu_note("cudaLibraryLoadData(num_jit=%ld, num_lib=%ld)", num_jit, num_lib, 0);
    return 0;
}

int _cudaLibraryGetKernel(void **kernel, void *library, const char *name) {
    strncpy(emu_kernel_name, name, sizeof emu_kernel_name - 1);
    *kernel = KERNEL_HANDLE;
    emu_note("cudaLibraryGetKernel", 0, 0, 0);
    return 0;
}

int _cuKernelGetAttribute(int *value, int attrib, void *kernel, int device) {
    int v = (attrib >= 0 && attrib < 64) ? emu_kernel_attr_values[attrib] : -1;
    emu_note("cuKernelGetAttribute(attr=%ld, device=%ld) -> %ld", attrib, device, v);
    *value = v < 0 ? 0 : v;
    return v < 0 ? 1 /* CUDA_ERROR_INVALID_VALUE */ : 0;
}

int _cudaDeviceGetAttribute(int *value, int attr, int device) {
    int v = (attr >= 0 && attr < 256) ? emu_device_attr_values[attr] : -1;
    emu_note("cudaDeviceGetAttribute(attr=%ld, device=%ld) -> %ld", attr, device, v);
    *value = v < 0 ? 0 : v;
    return v < 0 ? 1 /* cudaErrorInvalidValue */ : 0;
}

int _cudaGetDevice(int *device) { *device = 0; emu_note("cudaGetDevice", 0, 0, 0); return 0; }
int _cudaSetDevice(int device) { emu_note("cudaSetDevice(%ld)", device, 0, 0); return 0; }

int _cudaKernelSetAttributeForDevice(void *kernel, int attr, int value, int device) {
    emu_note("cudaKernelSetAttributeForDevice(attr=%ld, value=%ld, device=%ld)", attr, value, device);
    return 0;
}

int _cudaFuncSetAttribute(const void *func, int attr, int value) {
    emu_note("cudaFuncSetAttribute(attr=%ld, value=%ld)", attr, value, 0);
    return 0;
}

int _cudaLaunchKernelEx(const emu_launch_config *config, const void *func, void **args) {
    emu_launches++;
    emu_launch_func = func;
    emu_grid = config->grid;
    emu_block = config->block;
    emu_dynamic_smem = config->dynamic_smem;
    emu_num_attrs = config->num_attrs < 16 ? config->num_attrs : 16;
    for (unsigned i = 0; i < emu_num_attrs; i++) emu_attrs[i] = config->attrs[i];
    size_t off = 0;
    for (int i = 0; i < emu_num_params; i++) {
        if (off + emu_param_sizes[i] > EMU_MAX_PARAM_BYTES) return 1;
        memcpy(emu_param_bytes + off, args[i], emu_param_sizes[i]);
        off += emu_param_sizes[i];
    }
    emu_note("cudaLaunchKernelEx(num_attrs=%ld)", config->num_attrs, 0, 0);
    return 0;
}

/* ---- the DSL runtime's lazy library initialisation (libcute_dsl_runtime's cuda_dialect_init_library_once).
 * The exported object's cuda_init / cuda_load_to_device take their arguments directly (read from its x86-64
 * code: cuda_init(cudaLibrary_t *lib) calls cudaLibraryLoadData(lib, image, 0, 0, 0, 0, 0, 0);
 * cuda_load_to_device(cudaLibrary_t *lib, int device) resolves the kernel and sets its attributes), each
 * returning a cudaError_t. */
typedef int (*emu_init_fn)(void **library);
typedef int (*emu_load_fn)(void **library, int device);
static void *emu_library_storage = 0;

int cuda_dialect_init_library_once(int64_t *state, void *cuda_init, void *cuda_load_to_device, void *set_error) {
    if (*state) return 0;
    int err = ((emu_init_fn)cuda_init)(&emu_library_storage);
    if (err) { snprintf(emu_error, sizeof emu_error, "cuda_init failed: %d", err); return -1; }
    err = ((emu_load_fn)cuda_load_to_device)(&emu_library_storage, 0);
    if (err) { snprintf(emu_error, sizeof emu_error, "cuda_load_to_device failed: %d", err); return -1; }
    *state = (int64_t)(intptr_t)&emu_library_storage;
    return 0;
}

void cuda_dialect_unload_library_once(int64_t *state) { *state = 0; }

const char *cuda_dialect_get_error_name(int code) { return "emulated CUDA error"; }

/* ---- TVM-FFI error and stream entry points the exported function calls */
void TVMFFIErrorSetRaisedFromCStr(const char *kind, const char *message) {
    snprintf(emu_error, sizeof emu_error, "%s: %s", kind, message);
}

void TVMFFIErrorSetRaisedFromCStrParts(const char *kind, const char **parts, int32_t num_parts) {
    size_t n = (size_t)snprintf(emu_error, sizeof emu_error, "%s: ", kind);
    for (int i = 0; i < num_parts && n < sizeof emu_error; i++)
        n += (size_t)snprintf(emu_error + n, sizeof emu_error - n, "%s", parts[i] ? parts[i] : "");
}

void CuteDSLRT_TVMFFISetRaisedCudaError(const char *where, int code) {
    snprintf(emu_error, sizeof emu_error, "CUDA error %d (%s)", code, where ? where : "");
}

void CuteDSLRT_TVMFFISetRaisedCudaLaunchError(const char *where, int code) {
    snprintf(emu_error, sizeof emu_error, "CUDA launch error %d (%s)", code, where ? where : "");
}

void *TVMFFIEnvGetStream(int32_t device_type, int32_t device_id) { return 0; }
