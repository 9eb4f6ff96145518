/* Stand-ins for the CUDA runtime entry points that the CuTe DSL's exported host code imports.
 *
 * Built by harness/capture.py together with the object file that `export_to_c` writes; nothing here touches a
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
/* The launched kernel's resources (from its cubin; -1: unknown) and its .reqntid (0: none). */
int emu_kernel_static_smem = -1;
int emu_kernel_registers = -1;
emu_dim3 emu_kernel_reqntid = {0, 0, 0};
/* B200 (sm_100) limits the launch stand-in enforces (set by harness/capture.py: B200_LIMITS, with its sources). */
int emu_limit_threads_per_block, emu_limit_block_x, emu_limit_block_y, emu_limit_block_z;
long emu_limit_grid_x;
int emu_limit_grid_y, emu_limit_grid_z;
int emu_limit_smem_default, emu_limit_smem_optin, emu_limit_regs_per_block, emu_limit_reg_unit;
int emu_limit_cluster_portable, emu_limit_cluster_nonportable;

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
/* Why the stand-ins refused a call the CUDA runtime would refuse on a B200 (empty: nothing refused). The host
 * code reports the error code in its own words; this keeps the limit that was broken. */
char emu_refusal[1024];
/* Function attributes as set; they persist across calls like the kernel's own (the host code sets them once, when it
 * loads the library), so emu_reset leaves them. */
int emu_max_dynamic_smem_attr = -1;   /* cudaFuncAttributeMaxDynamicSharedMemorySize (-1: never set) */
int emu_nonportable_cluster_attr = 0; /* cudaFuncAttributeNonPortableClusterSizeAllowed */

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
    emu_refusal[0] = 0;
    emu_num_attrs = 0;
    memset(emu_param_bytes, 0, sizeof emu_param_bytes);
}

/* C stdio buffers what the exported host code prints (the DSL's own "Error: ..." lines): Python flushes it. */
void emu_flush(void) { fflush(NULL); }

#define CUDA_ERROR_INVALID_VALUE 1          /* cudaErrorInvalidValue (driver_types.h) */
#define CUDA_ERROR_INVALID_CONFIGURATION 9  /* cudaErrorInvalidConfiguration */
#define CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES 701 /* cudaErrorLaunchOutOfResources */
#define CUDA_ERROR_CLUSTER_OUT_OF_RESOURCES 912 /* cudaErrorClusterOutOfResources */
#define CUDA_ERROR_INVALID_CLUSTER_SIZE 913 /* cudaErrorInvalidClusterSize */
#define FUNC_ATTR_MAX_DYNAMIC_SHARED_MEMORY_SIZE 8       /* cudaFuncAttributeMaxDynamicSharedMemorySize */
#define FUNC_ATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED 14   /* cudaFuncAttributeNonPortableClusterSizeAllowed */
#define LAUNCH_ATTR_CLUSTER_DIMENSION 4                  /* cudaLaunchAttributeClusterDimension */

static int emu_refuse(int code, const char *fmt, long a, long b, long c, long d) {
    snprintf(emu_refusal, sizeof emu_refusal, fmt, a, b, c, d);
    return code;
}

/* A function attribute as cudaFuncSetAttribute / cudaKernelSetAttributeForDevice apply it: the dynamic shared
 * memory a kernel may request cannot exceed the opt-in maximum per block less its static shared memory (CUDA
 * runtime API, cudaFuncSetAttribute: cudaFuncAttributeMaxDynamicSharedMemorySize). */
static int emu_set_func_attr(int attr, int value) {
    if (attr == FUNC_ATTR_MAX_DYNAMIC_SHARED_MEMORY_SIZE) {
        long room = (long)emu_limit_smem_optin - (emu_kernel_static_smem > 0 ? emu_kernel_static_smem : 0);
        if (value < 0 || value > room)
            return emu_refuse(CUDA_ERROR_INVALID_VALUE,
                              "cudaFuncAttributeMaxDynamicSharedMemorySize %ld > %ld bytes (the B200's %ld-byte opt-in "
                              "maximum per block less %ld bytes of static shared memory)",
                              value, room, emu_limit_smem_optin, emu_kernel_static_smem > 0 ? emu_kernel_static_smem : 0);
        emu_max_dynamic_smem_attr = value;
    } else if (attr == FUNC_ATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) {
        emu_nonportable_cluster_attr = value;
    }
    return 0;
}

/* What the CUDA runtime checks before it launches on a B200; 0 or the error it would return, with the broken
 * limit in emu_refusal. Limits: emu_limit_* (harness/capture.py B200_LIMITS cites them). */
static int emu_check_launch(const emu_launch_config *config) {
    emu_dim3 g = config->grid, b = config->block, c = {1, 1, 1};
    for (unsigned i = 0; i < config->num_attrs; i++)
        if (config->attrs[i].id == LAUNCH_ATTR_CLUSTER_DIMENSION) memcpy(&c, config->attrs[i].val, sizeof c);
    long threads = (long)b.x * b.y * b.z;
    if (!b.x || !b.y || !b.z || !g.x || !g.y || !g.z)
        return emu_refuse(CUDA_ERROR_INVALID_CONFIGURATION, "empty grid or block (grid %ld CTAs, block %ld threads)",
                          (long)g.x * g.y * g.z, threads, 0, 0);
    if (threads > emu_limit_threads_per_block || b.x > (unsigned)emu_limit_block_x || b.y > (unsigned)emu_limit_block_y
        || b.z > (unsigned)emu_limit_block_z)
        return emu_refuse(CUDA_ERROR_INVALID_CONFIGURATION,
                          "block of %ld threads (%ld x %ld x %ld): above the B200's per-block limits",
                          threads, b.x, b.y, b.z);
    if (g.x > emu_limit_grid_x || g.y > (unsigned)emu_limit_grid_y || g.z > (unsigned)emu_limit_grid_z)
        return emu_refuse(CUDA_ERROR_INVALID_CONFIGURATION, "grid %ld x %ld x %ld exceeds the B200's grid limits",
                          g.x, g.y, g.z, 0);
    if (emu_kernel_reqntid.x && (b.x != emu_kernel_reqntid.x || b.y != emu_kernel_reqntid.y || b.z != emu_kernel_reqntid.z))
        return emu_refuse(CUDA_ERROR_INVALID_VALUE,
                          "block of %ld threads, but the kernel's .reqntid is %ld x %ld x %ld (PTX ISA 11.4.3: the launch "
                          "must use exactly that block shape)",
                          threads, emu_kernel_reqntid.x, emu_kernel_reqntid.y, emu_kernel_reqntid.z);
    long dyn = (long)config->dynamic_smem, stat = emu_kernel_static_smem > 0 ? emu_kernel_static_smem : 0;
    long dyn_max = emu_max_dynamic_smem_attr >= 0 ? emu_max_dynamic_smem_attr : emu_limit_smem_default - stat;
    if (dyn + stat > emu_limit_smem_optin)
        return emu_refuse(CUDA_ERROR_INVALID_VALUE,
                          "shared memory per block %ld bytes (dynamic %ld + static %ld) > the B200's %ld",
                          dyn + stat, dyn, stat, emu_limit_smem_optin);
    if (dyn > dyn_max)
        return emu_refuse(CUDA_ERROR_INVALID_VALUE, emu_max_dynamic_smem_attr >= 0
                          ? "dynamic shared memory %ld bytes > %ld, the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize"
                          : "dynamic shared memory %ld bytes > %ld: above 48 KiB per block needs "
                            "cudaFuncAttributeMaxDynamicSharedMemorySize set first",
                          dyn, dyn_max, 0, 0);
    if (emu_kernel_registers > 0) {
        long warps = (threads + 31) / 32;
        long per_warp = (emu_kernel_registers * 32 + emu_limit_reg_unit - 1) / emu_limit_reg_unit * emu_limit_reg_unit;
        if (warps * per_warp > emu_limit_regs_per_block)
            return emu_refuse(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
                              "%ld registers per thread x %ld warps (%ld registers) > the B200's %ld per block",
                              emu_kernel_registers, warps, warps * per_warp, emu_limit_regs_per_block);
    }
    long csize = (long)c.x * c.y * c.z;
    long cmax = emu_nonportable_cluster_attr ? emu_limit_cluster_nonportable : emu_limit_cluster_portable;
    if (!c.x || !c.y || !c.z || csize > cmax)
        return emu_refuse(CUDA_ERROR_INVALID_CLUSTER_SIZE,
                          "cluster of %ld CTAs > %ld (portable limit %ld; up to the non-portable %ld only with "
                          "cudaFuncAttributeNonPortableClusterSizeAllowed set)",
                          csize, cmax, emu_limit_cluster_portable, emu_limit_cluster_nonportable);
    if (g.x % c.x || g.y % c.y || g.z % c.z)
        return emu_refuse(CUDA_ERROR_INVALID_CLUSTER_SIZE, "grid %ld x %ld x %ld is not a multiple of the cluster shape",
                          g.x, g.y, g.z, 0);
    return 0;
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
    return emu_set_func_attr(attr, value);
}

int _cudaFuncSetAttribute(const void *func, int attr, int value) {
    emu_note("cudaFuncSetAttribute(attr=%ld, value=%ld)", attr, value, 0);
    return emu_set_func_attr(attr, value);
}

int _cudaLaunchKernelEx(const emu_launch_config *config, const void *func, void **args) {
    int refused = emu_check_launch(config);
    if (refused) {
        emu_note("cudaLaunchKernelEx refused: error %ld", refused, 0, 0);
        return refused;
    }
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
