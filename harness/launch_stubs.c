/* Stand-ins for the CUDA runtime and driver entry points that host code calls on its way to a kernel launch.
 *
 * Nothing here touches a GPU. Every call is recorded so that Python can read back what the real host code asked
 * for: the module image, the kernel's name, the function attributes it set, and each launch (grid, block, dynamic
 * shared memory, launch attributes, parameter bytes). Built by harness/capture.py in two forms:
 *   - linked with the object file a CuTe DSL `export_to_c` writes (the DSL runtime's underscore-prefixed wrappers
 *     _cudaLaunchKernelEx, _cudaLibraryLoadData, ...);
 *   - alone, as libemu_cuda.so, the library a CUDA extension built for the emulator links in place of libcudart and
 *     libcuda (harness/cuda_build.py): the entry points nvcc's generated host code calls (__cudaRegisterFatBinary,
 *     __cudaRegisterFunction, __cudaPushCallConfiguration, __cudaLaunchKernel, ...), the runtime API a launcher uses
 *     (cudaLaunchKernel, cudaLaunchKernelExC, cudaFuncSetAttribute, cudaMalloc, cudaGetLastError, ...) and the driver
 *     API calls of TMA set-up (cuTensorMapEncodeTiled, cuGetErrorString).
 * A kernel the host code can name (a DSL library's cudaLibraryGetKernel, an nvcc module's __cudaRegisterFunction) is
 * an entry of emu_kernels. Python installs two callbacks (harness/host.py): emu_resolve primes the launch checks with
 * one kernel's resources (parameter sizes, registers, static shared memory, .reqntid) before it is checked or
 * launched, and emu_on_launch runs a launch the moment the host code makes it (the emulator runs it against host
 * memory, so the host code after it sees its results, as after a synchronising launch). Without them the stand-ins
 * record one launch with whatever was primed (harness/capture.py's capture of this package's kernel).
 * Struct layouts follow the CUDA runtime API headers (driver_types.h: cudaLaunchConfig_st, cudaLaunchAttribute_st =
 * {id; pad to 8; union value of 64 bytes}; vector_types.h: dim3).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    void *queue;
    emu_launch_attr *attrs;
    unsigned num_attrs;
} emu_launch_config;

#define EMU_MAX_PARAMS 64
#define EMU_MAX_PARAM_BYTES 65536
#define EMU_MAX_LOG 256
#define EMU_MAX_KERNELS 512
#define EMU_MAX_ALLOCS 4096

/* ---- what Python sets before the call */
int emu_num_params = 0;
int emu_param_sizes[EMU_MAX_PARAMS];
int emu_device_attr_values[256];      /* cudaDeviceGetAttribute answers, by attribute id (-1: unknown) */
int emu_kernel_attr_values[64];       /* cuKernelGetAttribute answers, by attribute id (-1: unknown) */
/* The launched kernel's resources (from its cubin; -1: unknown), its .reqntid and its compile-time cluster shape
 * (.reqnctapercluster: CUDA's __cluster_dims__), 0: none. */
int emu_kernel_static_smem = -1;
int emu_kernel_registers = -1;
emu_dim3 emu_kernel_reqntid = {0, 0, 0};
emu_dim3 emu_kernel_reqnctapercluster = {0, 0, 0};
/* B200 (sm_100) limits the launch stand-in enforces (set by harness/capture.py: B200_LIMITS, with its sources). */
int emu_limit_threads_per_block, emu_limit_block_x, emu_limit_block_y, emu_limit_block_z;
long emu_limit_grid_x;
int emu_limit_grid_y, emu_limit_grid_z;
int emu_limit_smem_default, emu_limit_smem_optin, emu_limit_regs_per_block, emu_limit_reg_unit;
int emu_limit_cluster_portable, emu_limit_cluster_nonportable;

/* ---- callbacks (harness/host.py) */
typedef int (*emu_resolve_fn)(int kernel);               /* prime the checks for emu_kernels[kernel]; 0 or an error */
typedef int (*emu_launch_fn)(int kernel, void **args);   /* run the launch just recorded; 0 or a cudaError */
typedef int (*emu_encode_fn)(void *tensor_map, int dtype, unsigned rank, void *address, const uint64_t *dims,
                             const uint64_t *strides, const unsigned *box, const unsigned *element_strides,
                             int interleave, int swizzle, int l2_promotion, int oob_fill);  /* a CUresult */
emu_resolve_fn emu_resolve = 0;
emu_launch_fn emu_on_launch = 0;
emu_encode_fn emu_encode_tiled = 0;

/* ---- what the stubs record */
const void *emu_library_data = 0;
int emu_library_loads = 0;
char emu_kernel_name[4096];
int emu_launches = 0;
emu_dim3 emu_grid, emu_block;
emu_dim3 emu_cluster; /* the launch's cluster shape: its attribute, the kernel's compile-time shape, or 1 x 1 x 1 */
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
/* Function attributes of the kernel being checked; they persist across calls like the kernel's own (the host code
 * sets them once), so emu_reset leaves them. A registered kernel keeps its own (emu_kernel_entry), loaded here when
 * it is resolved. */
int emu_max_dynamic_smem_attr = -1;   /* cudaFuncAttributeMaxDynamicSharedMemorySize (-1: never set) */
int emu_nonportable_cluster_attr = 0; /* cudaFuncAttributeNonPortableClusterSizeAllowed */

/* Kernels the host code can launch: handle (what it passes as the function), name, module image, and the shared
 * object holding the host code that registered it (dladdr; "" for a DSL library). */
typedef struct {
    const void *handle;
    char name[1024];
    const void *image;
    char module_path[1024];
    int max_dynamic_smem_attr;
    int nonportable_cluster_attr;
} emu_kernel_entry;
emu_kernel_entry emu_kernels[EMU_MAX_KERNELS];
int emu_num_kernels = 0;
int emu_current_kernel = -1;          /* the entry whose resources are primed (-1: none, the single-kernel capture) */

/* Device memory handed out by cudaMalloc: host memory the emulator addresses as global memory. */
typedef struct { void *base; size_t size; } emu_alloc;
emu_alloc emu_allocs[EMU_MAX_ALLOCS];
int emu_num_allocs = 0;

int emu_last_error = 0;               /* cudaGetLastError / cudaPeekAtLastError */

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
    emu_last_error = 0;
    memset(emu_param_bytes, 0, sizeof emu_param_bytes);
}

/* C stdio buffers what the exported host code prints (the DSL's own "Error: ..." lines): Python flushes it. */
void emu_flush(void) { fflush(NULL); }

#define CUDA_SUCCESS_CODE 0
#define CUDA_ERROR_INVALID_VALUE 1          /* cudaErrorInvalidValue (driver_types.h) */
#define CUDA_ERROR_MEMORY_ALLOCATION 2      /* cudaErrorMemoryAllocation */
#define CUDA_ERROR_INVALID_CONFIGURATION 9  /* cudaErrorInvalidConfiguration */
#define CUDA_ERROR_INVALID_DEVICE_FUNCTION 98 /* cudaErrorInvalidDeviceFunction */
#define CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES 701 /* cudaErrorLaunchOutOfResources */
#define CUDA_ERROR_NOT_SUPPORTED 801        /* CUDA_ERROR_NOT_SUPPORTED (cuda.h): the emulator's encoder's own limit */
#define CUDA_ERROR_INVALID_CLUSTER_SIZE 912 /* cudaErrorInvalidClusterSize */
#define CUDA_ERROR_UNKNOWN 999              /* cudaErrorUnknown */
#define FUNC_ATTR_MAX_DYNAMIC_SHARED_MEMORY_SIZE 8       /* cudaFuncAttributeMaxDynamicSharedMemorySize */
#define FUNC_ATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED 14   /* cudaFuncAttributeNonPortableClusterSizeAllowed */
#define LAUNCH_ATTR_CLUSTER_DIMENSION 4                  /* cudaLaunchAttributeClusterDimension */

/* What cudaGetErrorString / cuGetErrorString and the Name functions answer for the codes the stand-ins return: the
 * runtime's and the driver's own words (the CUresult and cudaError_t values above share their numbers), so host code
 * that prints the error prints what it prints on a B200 (GPU MODE's B200 runner printed jIab-b's s_128t.py's
 * "Scale tensormap failed: invalid argument"; NVIDIA/cuda-python's error table gives the driver's strings). Why the
 * stand-ins refused is in emu_refusal, for the verdict. */
static const struct { int code; const char *name, *runtime_name, *text; } emu_errors[] = {
    {0, "CUDA_SUCCESS", "cudaSuccess", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "cudaErrorInvalidValue", "invalid argument"},
    {CUDA_ERROR_MEMORY_ALLOCATION, "CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation", "out of memory"},
    {CUDA_ERROR_INVALID_CONFIGURATION, "CUDA_ERROR_INVALID_CONFIGURATION", "cudaErrorInvalidConfiguration",
     "invalid configuration argument"},
    {CUDA_ERROR_INVALID_DEVICE_FUNCTION, "CUDA_ERROR_INVALID_DEVICE_FUNCTION", "cudaErrorInvalidDeviceFunction",
     "invalid device function"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "cudaErrorLaunchOutOfResources",
     "too many resources requested for launch"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "cudaErrorNotSupported", "operation not supported"},
    {CUDA_ERROR_INVALID_CLUSTER_SIZE, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "cudaErrorInvalidClusterSize",
     "a kernel launch error has occurred due to cluster misconfiguration"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "cudaErrorUnknown", "unknown error"},
};

static int emu_error_index(int code) {
    for (unsigned i = 0; i < sizeof emu_errors / sizeof emu_errors[0]; i++)
        if (emu_errors[i].code == code) return (int)i;
    return -1;
}

static int emu_refuse(int code, const char *fmt, long a, long b, long c, long d) {
    snprintf(emu_refusal, sizeof emu_refusal, fmt, a, b, c, d);
    return code;
}

/* ---- the kernel registry */
static int emu_kernel_index(const void *handle) {
    for (int i = 0; i < emu_num_kernels; i++)
        if (emu_kernels[i].handle == handle) return i;
    return -1;
}

static int emu_add_kernel(const void *handle, const char *name, const void *image) {
    int i = emu_kernel_index(handle);
    if (i >= 0) return i;
    if (emu_num_kernels >= EMU_MAX_KERNELS) return -1;
    i = emu_num_kernels++;
    emu_kernel_entry *k = &emu_kernels[i];
    k->handle = handle;
    strncpy(k->name, name, sizeof k->name - 1);
    k->image = image;
    k->module_path[0] = 0;
    Dl_info info;
    if (handle && dladdr(handle, &info) && info.dli_fname) strncpy(k->module_path, info.dli_fname, sizeof k->module_path - 1);
    k->max_dynamic_smem_attr = -1;
    k->nonportable_cluster_attr = 0;
    return i;
}

/* Prime the checks for the kernel `handle` names (a registered one: its resources through emu_resolve, its own function
 * attributes); an unregistered handle keeps what Python primed (the single-kernel capture). 0 or the runtime's error. */
static int emu_select_kernel(const void *handle) {
    int i = emu_kernel_index(handle);
    if (i < 0) {
        if (emu_resolve) {
            emu_refuse(CUDA_ERROR_INVALID_DEVICE_FUNCTION, "the function at %#lx is no kernel the host code registered",
                       (long)handle, 0, 0, 0);
            return CUDA_ERROR_INVALID_DEVICE_FUNCTION;
        }
        return 0;
    }
    if (emu_current_kernel >= 0 && emu_current_kernel != i) {  /* keep the previous kernel's attributes with it */
        emu_kernels[emu_current_kernel].max_dynamic_smem_attr = emu_max_dynamic_smem_attr;
        emu_kernels[emu_current_kernel].nonportable_cluster_attr = emu_nonportable_cluster_attr;
    }
    if (emu_current_kernel != i) {
        emu_max_dynamic_smem_attr = emu_kernels[i].max_dynamic_smem_attr;
        emu_nonportable_cluster_attr = emu_kernels[i].nonportable_cluster_attr;
    }
    emu_current_kernel = i;
    strncpy(emu_kernel_name, emu_kernels[i].name, sizeof emu_kernel_name - 1);
    return emu_resolve ? emu_resolve(i) : 0;
}

/* A function attribute as cudaFuncSetAttribute / cudaKernelSetAttributeForDevice apply it: the dynamic shared
 * memory a kernel may request cannot exceed the opt-in maximum per block less its static shared memory (CUDA
 * runtime API, cudaFuncSetAttribute: cudaFuncAttributeMaxDynamicSharedMemorySize). */
static int emu_set_func_attr(const void *func, int attr, int value) {
    int err = emu_select_kernel(func);
    if (err) return err;
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
    emu_dim3 g = config->grid, b = config->block, c = {1, 1, 1}, r = emu_kernel_reqnctapercluster;
    int asked = 0;
    for (unsigned i = 0; i < config->num_attrs; i++)
        if (config->attrs[i].id == LAUNCH_ATTR_CLUSTER_DIMENSION) {
            memcpy(&c, config->attrs[i].val, sizeof c);
            asked = 1;
        }
    /* a kernel compiled with a cluster shape (PTX ISA 11.4: .reqnctapercluster; CUDA's __cluster_dims__) launches in
     * clusters of that shape, with <<<>>> too; a launch may not ask for another (CUDA C++ Programming Guide, "Thread
     * Block Clusters": the compile-time cluster size cannot be modified at launch) */
    if (r.x) {
        if (asked && (c.x != r.x || c.y != r.y || c.z != r.z))
            return emu_refuse(CUDA_ERROR_INVALID_CLUSTER_SIZE,
                              "a cluster of %ld CTAs asked at launch, but the kernel's compile-time cluster "
                              "(.reqnctapercluster, __cluster_dims__) is %ld x %ld x %ld",
                              (long)c.x * c.y * c.z, r.x, r.y, r.z);
        c = r;
    }
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
    /* without the attribute the dynamic maximum is what the default 48 KiB leaves beside the static memory, at
     * least 0: a kernel whose static shared memory alone passes 48 KiB (ptxas accepts it for sm_100a: a public CUDA
     * kernel declares 221264 bytes of __shared__ arrays and runs on a B200) launches with no dynamic memory */
    long dyn_max = emu_max_dynamic_smem_attr >= 0 ? emu_max_dynamic_smem_attr
                   : (emu_limit_smem_default > stat ? emu_limit_smem_default - stat : 0);
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
    emu_cluster = c;
    return 0;
}

/* Every launch entry point ends here: the kernel's checks primed, the B200's launch checks, the record, and (with
 * emu_on_launch) the run itself. */
static int emu_launch(const emu_launch_config *config, const void *func, void **args, const char *how) {
    int err = emu_select_kernel(func);
    if (!err) err = emu_check_launch(config);
    if (err) {
        emu_note("launch refused: error %ld", err, 0, 0);
        emu_last_error = err;
        return err;
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
        if (off + emu_param_sizes[i] > EMU_MAX_PARAM_BYTES) return CUDA_ERROR_INVALID_VALUE;
        memcpy(emu_param_bytes + off, args[i], emu_param_sizes[i]);
        off += emu_param_sizes[i];
    }
    emu_note(how, config->num_attrs, 0, 0);
    if (emu_on_launch) {
        err = emu_on_launch(emu_current_kernel, args);
        if (err) emu_last_error = err;
    }
    return err;
}

/* ---- the DSL runtime's wrappers (underscore-prefixed, the CUDA runtime's signatures) */
int _cudaLibraryLoadData(void **library, const void *code, void *jit_options, void **jit_values,
                         unsigned num_jit, void *lib_options, void **lib_values, unsigned num_lib) {
    emu_library_data = code;
    emu_library_loads++;
    *library = (void *)code;
    emu_note("cudaLibraryLoadData(num_jit=%ld, num_lib=%ld)", num_jit, num_lib, 0);
    return 0;
}

/* A kernel's handle is its registry entry: each name of each library gets its own. */
int _cudaLibraryGetKernel(void **kernel, void *library, const char *name) {
    strncpy(emu_kernel_name, name, sizeof emu_kernel_name - 1);
    int i = -1;
    for (int j = 0; j < emu_num_kernels; j++)
        if (emu_kernels[j].image == library && !strcmp(emu_kernels[j].name, name)) i = j;
    if (i < 0 && emu_num_kernels < EMU_MAX_KERNELS) {
        i = emu_num_kernels;
        emu_add_kernel(&emu_kernels[i], name, library);
    }
    *kernel = i >= 0 ? (void *)&emu_kernels[i] : 0;
    emu_note("cudaLibraryGetKernel", 0, 0, 0);
    return i >= 0 ? 0 : CUDA_ERROR_INVALID_VALUE;
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
    return emu_set_func_attr(kernel, attr, value);
}

int _cudaFuncSetAttribute(const void *func, int attr, int value) {
    emu_note("cudaFuncSetAttribute(attr=%ld, value=%ld)", attr, value, 0);
    return emu_set_func_attr(func, attr, value);
}

int _cudaLaunchKernelEx(const emu_launch_config *config, const void *func, void **args) {
    return emu_launch(config, func, args, "cudaLaunchKernelEx(num_attrs=%ld)");
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

/* ---- TVM-FFI error and queue entry points the exported function calls */
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

/* ==== the CUDA runtime as nvcc's generated host code and a hand-written launcher call it ==================== */

/* nvcc's module registration (crt/host_runtime.h): the fatbinary wrapper {int magic; int version; const void *data;
 * void *filename_or_fatbins}, then one __cudaRegisterFunction per kernel with its host stub and mangled name. */
typedef struct { int magic; int version; const void *data; void *filename_or_fatbins; } emu_fatbin_wrapper;
typedef struct { const void *image; } emu_module;

void **__cudaRegisterFatBinary(void *fat_cubin) {
    emu_module *m = (emu_module *)calloc(1, sizeof *m);
    m->image = fat_cubin ? ((emu_fatbin_wrapper *)fat_cubin)->data : 0;
    emu_note("__cudaRegisterFatBinary", 0, 0, 0);
    return (void **)m;
}

void __cudaRegisterFatBinaryEnd(void **handle) { (void)handle; }
void __cudaUnregisterFatBinary(void **handle) { (void)handle; }

void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun, const char *device_name,
                            int thread_limit, void *tid, void *bid, void *block, void *grid, int *warp_size) {
    emu_add_kernel(host_fun, device_name, handle ? ((emu_module *)handle)->image : 0);
}

/* A __device__ or __constant__ variable of a module. The emulator has no module-scope global state: a kernel that
 * reads one is refused where it does (emu.ptx), so its registration only needs recording. */
void __cudaRegisterVar(void **handle, char *host_var, char *device_address, const char *device_name, int ext,
                       size_t size, int constant, int global) {
    emu_note("__cudaRegisterVar(size=%ld, constant=%ld)", (long)size, constant, 0);
}

/* <<<grid, block, shared, queue>>>: the configuration is pushed, then the kernel's host stub pops it and launches. */
static emu_launch_config emu_pushed[16];
static int emu_num_pushed = 0;

unsigned __cudaPushCallConfiguration(emu_dim3 grid, emu_dim3 block, size_t shared_mem, void *queue) {
    if (emu_num_pushed >= 16) return 1;
    emu_launch_config c = {grid, block, shared_mem, queue, 0, 0};
    emu_pushed[emu_num_pushed++] = c;
    return 0;
}

int __cudaPopCallConfiguration(emu_dim3 *grid, emu_dim3 *block, size_t *shared_mem, void **queue) {
    if (!emu_num_pushed) return CUDA_ERROR_INVALID_CONFIGURATION;
    emu_launch_config c = emu_pushed[--emu_num_pushed];
    *grid = c.grid;
    *block = c.block;
    *shared_mem = c.dynamic_smem;
    *queue = c.queue;
    return 0;
}

int cudaLaunchKernel(const void *func, emu_dim3 grid, emu_dim3 block, void **args, size_t shared_mem, void *queue) {
    emu_launch_config c = {grid, block, shared_mem, queue, 0, 0};
    return emu_launch(&c, func, args, "cudaLaunchKernel(num_attrs=%ld)");
}

/* CUDA 13's <<<>>>: __cudaGetKernel turns the host stub into a kernel handle (here the stub itself). */
int __cudaGetKernel(const void **kernel, const void *func) { *kernel = func; return 0; }

int __cudaLaunchKernel(const void *kernel, emu_dim3 grid, emu_dim3 block, void **args, size_t shared_mem, void *queue) {
    return cudaLaunchKernel(kernel, grid, block, args, shared_mem, queue);
}

int __cudaLaunchKernel_ptsz(const void *kernel, emu_dim3 grid, emu_dim3 block, void **args, size_t shared_mem,
                            void *queue) {
    return cudaLaunchKernel(kernel, grid, block, args, shared_mem, queue);
}

int cudaLaunchKernelExC(const emu_launch_config *config, const void *func, void **args) {
    return emu_launch(config, func, args, "cudaLaunchKernelExC(num_attrs=%ld)");
}

int cudaLaunchKernelExC_ptsz(const emu_launch_config *config, const void *func, void **args) {
    return cudaLaunchKernelExC(config, func, args);
}

int cudaFuncSetAttribute(const void *func, int attr, int value) {
    emu_note("cudaFuncSetAttribute(attr=%ld, value=%ld)", attr, value, 0);
    int err = emu_set_func_attr(func, attr, value);
    if (err) emu_last_error = err;
    return err;
}

int cudaFuncSetCacheConfig(const void *func, int config) { return 0; }

int cudaDeviceGetAttribute(int *value, int attr, int device) { return _cudaDeviceGetAttribute(value, attr, device); }
int cudaGetDevice(int *device) { return _cudaGetDevice(device); }
int cudaSetDevice(int device) { return _cudaSetDevice(device); }
int cudaGetDeviceCount(int *count) { *count = 1; return 0; }
/* Launches run to completion when they are made (emu_on_launch): every wait is already over. */
int cudaDeviceSynchronize(void) { return 0; }
int cudaStreamSynchronize(void *queue) { return 0; }
int cudaGetLastError(void) { int e = emu_last_error; emu_last_error = 0; return e; }
int cudaPeekAtLastError(void) { return emu_last_error; }

const char *cudaGetErrorString(int code) {
    int i = emu_error_index(code);
    return i >= 0 ? emu_errors[i].text : "unrecognized error code";
}

const char *cudaGetErrorName(int code) {
    int i = emu_error_index(code);
    return i >= 0 ? emu_errors[i].runtime_name : "cudaErrorUnknown";
}

/* Device memory is host memory here: the emulator reads and writes global memory at the host address. */
int cudaMalloc(void **ptr, size_t size) {
    if (emu_num_allocs >= EMU_MAX_ALLOCS) return CUDA_ERROR_MEMORY_ALLOCATION;
    void *p = 0;
    if (posix_memalign(&p, 256, size ? size : 1)) return CUDA_ERROR_MEMORY_ALLOCATION;  /* cudaMalloc aligns to 256 */
    emu_allocs[emu_num_allocs].base = p;
    emu_allocs[emu_num_allocs].size = size;
    emu_num_allocs++;
    *ptr = p;
    return 0;
}

int cudaFree(void *ptr) {
    for (int i = 0; i < emu_num_allocs; i++)
        if (emu_allocs[i].base == ptr) {
            free(ptr);
            emu_allocs[i] = emu_allocs[--emu_num_allocs];
            return 0;
        }
    return ptr ? CUDA_ERROR_INVALID_VALUE : 0;
}

int cudaMemset(void *ptr, int value, size_t count) { memset(ptr, value, count); return 0; }
int cudaMemsetAsync(void *ptr, int value, size_t count, void *queue) { memset(ptr, value, count); return 0; }
int cudaMemcpy(void *dst, const void *src, size_t count, int kind) { memmove(dst, src, count); return 0; }
int cudaMemcpyAsync(void *dst, const void *src, size_t count, int kind, void *queue) {
    memmove(dst, src, count);
    return 0;
}

/* ==== the driver API calls of TMA set-up ================================================================== */
int cuTensorMapEncodeTiled(void *tensor_map, int dtype, unsigned rank, void *address, const uint64_t *dims,
                           const uint64_t *strides, const unsigned *box, const unsigned *element_strides,
                           int interleave, int swizzle, int l2_promotion, int oob_fill) {
    emu_note("cuTensorMapEncodeTiled(dtype=%ld, rank=%ld)", dtype, rank, 0);
    if (!emu_encode_tiled) return CUDA_ERROR_UNKNOWN;
    return emu_encode_tiled(tensor_map, dtype, rank, address, dims, strides, box, element_strides, interleave, swizzle,
                            l2_promotion, oob_fill);
}

int cuGetErrorString(int code, const char **text) {
    int i = emu_error_index(code);
    *text = i >= 0 ? emu_errors[i].text : 0;
    return i >= 0 ? 0 : CUDA_ERROR_INVALID_VALUE;
}

int cuGetErrorName(int code, const char **text) {
    int i = emu_error_index(code);
    *text = i >= 0 ? emu_errors[i].name : 0;
    return i >= 0 ? 0 : CUDA_ERROR_INVALID_VALUE;
}
int cuInit(unsigned flags) { return 0; }
int cuDriverGetVersion(int *version) { *version = 13000; return 0; }

/* cudaGetDriverEntryPoint(ByVersion): the driver functions above by name. */
int cudaGetDriverEntryPointByVersion(const char *symbol, void **func, unsigned version, unsigned long long flags,
                                     int *status) {
    static const struct { const char *name; void *fn; } table[] = {
        {"cuTensorMapEncodeTiled", (void *)cuTensorMapEncodeTiled}, {"cuGetErrorString", (void *)cuGetErrorString},
        {"cuGetErrorName", (void *)cuGetErrorName}, {"cuInit", (void *)cuInit},
        {"cuDriverGetVersion", (void *)cuDriverGetVersion},
    };
    *func = 0;
    for (unsigned i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(symbol, table[i].name)) *func = table[i].fn;
    if (status) *status = *func ? 0 : 1;  /* cudaDriverEntryPointSuccess / cudaDriverEntryPointSymbolNotFound */
    if (!*func) {
        snprintf(emu_error, sizeof emu_error, "cudaGetDriverEntryPoint(%s): not a driver function the emulator's "
                 "stand-ins provide", symbol);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return 0;
}

int cudaGetDriverEntryPoint(const char *symbol, void **func, unsigned long long flags, int *status) {
    return cudaGetDriverEntryPointByVersion(symbol, func, 13000, flags, status);
}
