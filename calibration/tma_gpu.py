"""Ground truth for emu/tma.py from a real GPU (Hopper or later): run on the device machine with its python3.

1. The CUDA driver's own cuTensorMapEncodeTiled (ctypes on libcuda) for a grid of parameter sets: one field
   varied at a time from a base, plus random valid sets. Output: every set with its return code and the 128
   bytes it produced.
2. Real TMA tile loads (cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes,
   tensor map in global memory, CuPy/NVRTC kernel for sm_90a): shared memory is filled with 0xA5, one load
   into (1024-aligned base + dst_offset), then the whole window is dumped. Global data: byte i of the tensor
   allocation is pattern(i) (below), so the emulator can rebuild it.

    python -m calibration.tma_gpu OUT_DIR
Writes OUT_DIR/tma_encode.json and OUT_DIR/tma_loads.npz (+ a log on stdout).
"""
import ctypes
import json
import os
import random
import sys

import numpy as np

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
ELEM_BITS = {0: 8, 1: 16, 2: 32, 3: 32, 4: 64, 5: 64, 6: 16, 7: 32, 8: 64, 9: 16, 10: 32, 11: 32, 12: 32,
             13: 4, 14: 4, 15: 6}


def pattern(n):
    i = np.arange(n, dtype=np.uint64)
    return ((i * 131 + (i >> 8) * 7 + (i >> 16) * 3 + 17) & 0xFF).astype(np.uint8)


import cupy as cp  # noqa: E402

cp.zeros(1)  # a current context: cuTensorMapEncodeTiled answers CUDA_ERROR_INVALID_CONTEXT (201) without one
cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuInit(0)
enc = cuda.cuTensorMapEncodeTiled
enc.restype = ctypes.c_int
enc.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]


def encode(p):
    r = p["rank"]
    buf = (ctypes.c_uint8 * 128)(*([0xCC] * 128))  # untouched bytes show as 0xCC
    dims = (ctypes.c_uint64 * 5)(*p["dims"])
    strides = (ctypes.c_uint64 * 5)(*(p["strides"] + [0] * (5 - len(p["strides"]))))
    box = (ctypes.c_uint32 * 5)(*p["box"])
    es = (ctypes.c_uint32 * 5)(*p["estrides"])
    rc = enc(buf, p["dtype"], r, ctypes.c_void_p(p["addr"]), dims, strides, box, es, p["interleave"], p["swizzle"],
             p["l2"], p["oob"])
    return rc, bytes(buf).hex()


BASE = dict(dtype=0, rank=3, addr=0x7F12_3456_7800, dims=[256, 20, 3], strides=[256, 5120], box=[128, 8, 2],
            estrides=[1, 1, 1], interleave=0, swizzle=3, l2=0, oob=0)


def variant(**kw):
    p = json.loads(json.dumps(BASE))
    p.update(kw)
    return p


cases = []
for dt in range(16):
    cases.append(variant(dtype=dt, swizzle=0, box=[16, 8, 2], dims=[256, 20, 3], strides=[512, 10240]))
    cases.append(variant(dtype=dt))
for r in range(1, 6):
    dims = [96, 7, 5, 3, 2][:r]
    strides = []
    s = 128
    for d in dims[:-1]:
        strides.append(s)
        s *= d + 1
    cases.append(variant(rank=r, dims=dims, strides=strides, box=[64, 4, 2, 2, 1][:r], estrides=[1] * r, swizzle=0))
    cases.append(variant(rank=r, dims=dims, strides=strides, box=[64, 4, 2, 2, 1][:r], estrides=[1] * r))
for a in (0x10, 0x7F00_0000_0000, 0xFFFF_FFFF_FFF0, 0x1234_5678_9AB0):
    cases.append(variant(addr=a))
for d0 in (1, 2, 255, 256, 65535, 65536, 1 << 20, (1 << 32) - 1, 1 << 32):
    cases.append(variant(dims=[d0, 20, 3], strides=[max(256, d0 + 15 & ~15), 5120 * 1024]))
for d1 in (1, 3, 1000, (1 << 32)):
    cases.append(variant(dims=[256, d1, 3], strides=[256, 256 * d1]))
for st in (16, 32, 48, 256, 4096, (1 << 32), (1 << 36), (1 << 40) - 16, (1 << 40), 0x12345678F0):
    cases.append(variant(strides=[256, st], dims=[256, 1, 3]))
    cases.append(variant(strides=[st, 5120 * 1024], dims=[16, 20, 3], box=[16, 8, 2]))
for b in range(1, 257, 17):
    cases.append(variant(box=[16, b, 2], swizzle=0))
    cases.append(variant(box=[b, 8, 2], swizzle=0))
for b2 in (1, 2, 3, 255, 256):
    cases.append(variant(box=[128, 8, b2]))
for es in (1, 2, 3, 4, 5, 7, 8, 9):
    cases.append(variant(estrides=[es, 1, 1], swizzle=0))
    cases.append(variant(estrides=[1, es, 1]))
    cases.append(variant(estrides=[1, 1, es]))
for il in (0, 1, 2):
    for sw in range(7):
        cases.append(variant(interleave=il, swizzle=sw, box=[16, 8, 2]))
        cases.append(variant(interleave=il, swizzle=sw, box=[32, 8, 2]))
        cases.append(variant(interleave=il, swizzle=sw))
for l2 in range(5):
    cases.append(variant(l2=l2))
for oob in (0, 1):
    cases.append(variant(oob=oob, dtype=7, box=[32, 8, 2]))
    cases.append(variant(oob=oob))
# The kernel's own tensor maps, as the emulator believes the DSL encodes them (FP4 A/B: 16U4_ALIGN8B;
# scales: UINT16 4D), so the driver's answer can be compared with the DSL's bytes.
cases.append(variant(dtype=13, dims=[512, 256, 1], strides=[256, 65536], box=[256, 128, 1], swizzle=3, l2=2))
cases.append(variant(dtype=13, dims=[1024, 384, 3], strides=[512, 196608], box=[256, 64, 1], swizzle=3, l2=2))
cases.append(variant(dtype=14, dims=[512, 256, 1], strides=[256, 65536], box=[256, 128, 1], swizzle=3, l2=2))
rng = random.Random(5)
for _ in range(150):
    dt = rng.choice([0, 1, 2, 3, 6, 7, 9, 13])
    r = rng.randint(1, 5)
    bits = ELEM_BITS[dt]
    sw = rng.choice([0, 0, 1, 2, 3])
    inner_box_bytes_max = {0: 256 * bits // 8, 1: 32, 2: 64, 3: 128}[sw]
    eb = max(1, bits // 8)
    b0max = max(1, min(256, inner_box_bytes_max * 8 // bits))
    box = [rng.randint(1, b0max)] + [rng.randint(1, 16) for _ in range(r - 1)]
    if (box[0] * bits // 8) % 16:
        box[0] = max(16 * 8 // bits, (box[0] * bits // 8 + 15) // 16 * 16 * 8 // bits)
    dims = [rng.randint(1, 5000) for _ in range(r)]
    strides = []
    s = (dims[0] * bits // 8 + 15) // 16 * 16 + 16 * rng.randint(0, 8)
    for d in dims[1:]:
        strides.append(s)
        s = s * d + 16 * rng.randint(0, 4)
    cases.append(dict(dtype=dt, rank=r, addr=rng.randrange(0, 1 << 48) & ~15, dims=dims, strides=strides, box=box,
                      estrides=[rng.choice([1, 1, 1, 2, 3]) for _ in range(r)], interleave=0, swizzle=sw,
                      l2=rng.randint(0, 3), oob=rng.randint(0, 1)))
results = []
for p in cases:
    rc, raw = encode(p)
    results.append({"params": p, "rc": rc, "bytes": raw})
ok = sum(r["rc"] == 0 for r in results)
print(f"encode: {len(results)} cases, {ok} accepted")
with open(os.path.join(OUT, "tma_encode.json"), "w") as f:
    json.dump(results, f)

# ------------------------------------------------------------------------------------------- real TMA loads

SRC = r'''
extern "C" __global__ void tma_load(unsigned long long tmap, unsigned char* out, int rank, int c0, int c1, int c2,
                                    int c3, int c4, int dst_off, int tx_bytes, int window, int* status) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long bar;
  unsigned base = (unsigned)__cvta_generic_to_shared(smem_raw);
  unsigned aligned = (base + 1023u) & ~1023u;
  unsigned char* win = smem_raw + (aligned - base);
  for (int i = threadIdx.x; i < window; i += blockDim.x) win[i] = 0xA5;
  unsigned barp = (unsigned)__cvta_generic_to_shared(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(barp) : "memory");
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: "l"(tmap) : "memory");
  }
  __syncthreads();
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned dst = aligned + dst_off;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(barp), "r"(tx_bytes) : "memory");
    if (rank == 1)
      asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];"
                   :: "r"(dst), "l"(tmap), "r"(c0), "r"(barp) : "memory");
    else if (rank == 2)
      asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                   :: "r"(dst), "l"(tmap), "r"(c0), "r"(c1), "r"(barp) : "memory");
    else if (rank == 3)
      asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
                   :: "r"(dst), "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(barp) : "memory");
    else if (rank == 4)
      asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];"
                   :: "r"(dst), "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(barp) : "memory");
    else
      asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, %6}], [%7];"
                   :: "r"(dst), "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(barp) : "memory");
    unsigned done = 0;
    long long spins = 0;
    while (!done && spins < 20000000) {
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                   : "=r"(done) : "r"(barp) : "memory");
      spins++;
    }
    status[0] = done ? 1 : 2;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < window; i += blockDim.x) out[i] = win[i];
}
'''
mod = cp.RawModule(code=SRC, options=("-arch=sm_90a", "-std=c++17"))
kern = mod.get_function("tma_load")
GLOBAL_BYTES = 1 << 22
gbuf = cp.asarray(pattern(GLOBAL_BYTES))
gaddr = int(gbuf.data.ptr)
tmap_dev = cp.zeros(256, dtype=cp.uint8)
tmap_addr = (int(tmap_dev.data.ptr) + 63) // 64 * 64
tmap_off = tmap_addr - int(tmap_dev.data.ptr)

LOADS = [
    # name, params (address = global allocation + goff), coords, dst_off
    ("u8_3d_sw128", dict(dtype=0, rank=3, dims=[256, 20, 3], strides=[256, 5120], box=[128, 8, 2]), [64, 4, 1], 0),
    ("u8_3d_sw128_dst1024", dict(dtype=0, rank=3, dims=[256, 20, 3], strides=[256, 5120], box=[128, 8, 2]), [0, 5, 0], 1024),
    ("u8_3d_sw128_oob", dict(dtype=0, rank=3, dims=[200, 20, 3], strides=[256, 5120], box=[128, 8, 2]), [128, 16, 2], 0),
    ("u8_3d_sw128_neg", dict(dtype=0, rank=3, dims=[256, 20, 3], strides=[256, 5120], box=[128, 8, 2]), [-16, -3, -1], 0),
    ("u8_4d_sw128_box64", dict(dtype=0, rank=4, dims=[192, 12, 5, 3], strides=[208, 208 * 12, 208 * 60],
                                box=[64, 4, 2, 2]), [64, 3, 1, 1], 0),
    ("f16_3d_sw128", dict(dtype=6, rank=3, dims=[128, 40, 2], strides=[272, 272 * 40], box=[64, 16, 1]), [64, 9, 1], 0),
    ("f16_2d_sw64", dict(dtype=6, rank=2, dims=[100, 40], strides=[224], box=[32, 16], swizzle=2), [32, 3], 0),
    ("u8_2d_sw32", dict(dtype=0, rank=2, dims=[100, 40], strides=[112], box=[32, 16], swizzle=1), [16, 3], 0),
    ("f32_2d_none_oob", dict(dtype=7, rank=2, dims=[30, 10], strides=[128], box=[16, 8], swizzle=0), [24, 6], 0),
    ("f32_2d_nan_oob", dict(dtype=7, rank=2, dims=[30, 10], strides=[128], box=[16, 8], swizzle=0, oob=1), [24, 6], 0),
    ("u16_4d_none_sfa", dict(dtype=1, rank=4, dims=[256, 8, 2, 3], strides=[512, 4096, 8192], box=[256, 1, 2, 1],
                             swizzle=0), [0, 3, 0, 2], 0),
    ("u8_5d_none", dict(dtype=0, rank=5, dims=[48, 3, 4, 2, 3], strides=[64, 192, 768, 1536], box=[32, 2, 3, 2, 2],
                        swizzle=0), [16, 1, 2, 0, 1], 128),
    ("u8_3d_sw128_estride", dict(dtype=0, rank=3, dims=[256, 20, 3], strides=[256, 5120], box=[128, 8, 2],
                                  estrides=[1, 2, 1]), [0, 2, 0], 0),
    # last: a misaligned destination may fault and end the run (results so far are kept)
    ("u8_3d_sw128_dst512", dict(dtype=0, rank=3, dims=[256, 20, 3], strides=[256, 5120], box=[128, 8, 2]), [0, 5, 0], 512),
    ("u8_3d_sw128_dst128", dict(dtype=0, rank=3, dims=[256, 20, 3], strides=[256, 5120], box=[128, 8, 2]), [0, 5, 0], 128),
    ("u8_3d_sw128_dst384", dict(dtype=0, rank=3, dims=[256, 20, 3], strides=[256, 5120], box=[128, 8, 2]), [0, 5, 0], 384),
    ("u8_2d_none_dst16", dict(dtype=0, rank=2, dims=[64, 8], strides=[64], box=[16, 2], swizzle=0), [0, 0], 16),
]
loads = {}
summary = []
for name, p, coords, dst in LOADS:
    q = dict(dict(addr=gaddr + 4096, estrides=[1] * p["rank"], interleave=0, swizzle=3, l2=0, oob=0), **p)
    rc, raw = encode(q)
    if rc:
        summary.append((name, "encode rc", rc))
        continue
    tmap_dev[tmap_off:tmap_off + 128] = cp.asarray(np.frombuffer(bytes.fromhex(raw), np.uint8))
    bits = ELEM_BITS[q["dtype"]]
    nelem = 1
    for b, e in zip(q["box"], q["estrides"]):
        nelem *= -(-b // e)
    tx = nelem * bits // 8
    window = dst + tx + 1024
    out = cp.zeros(window, dtype=cp.uint8)
    status = cp.zeros(1, dtype=cp.int32)
    c = list(coords) + [0] * (5 - len(coords))
    try:
        kern((1,), (128,), (np.uint64(tmap_addr), out, np.int32(q["rank"]), *[np.int32(v) for v in c], np.int32(dst),
                            np.int32(tx), np.int32(window), status), shared_mem=window + 1024 + 64)
        cp.cuda.runtime.deviceSynchronize()
        st = int(status.get()[0])
    except Exception as e:  # noqa: BLE001
        summary.append((name, "launch error", str(e)[:200]))
        break  # a sticky error: later launches would fail too
    loads[name + ".smem"] = out.get()
    loads[name + ".meta"] = np.frombuffer(json.dumps({"params": q, "global_base": gaddr, "coords": coords,
                                                      "dst_off": dst, "tx": tx, "status": st,
                                                      "tmap": raw}).encode(), np.uint8)
    summary.append((name, "status", st, "tx", tx))
for s in summary:
    print(*s)
np.savez_compressed(os.path.join(OUT, "tma_loads.npz"), **loads)
print("device:", cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "driver", cp.cuda.runtime.driverGetVersion())
