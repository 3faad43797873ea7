/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The copy kernel: a batch of copies between device memory and device or
 * pinned host memory as one launch.
 *
 * The copy engines take 3.5 to 5 µs of the GPU's time for each copy
 * however small, batched or not (an H200, driver 580); one launch of this
 * kernel moves 16 copies of up to 128 KiB in about 5 µs, of 8 MiB in 68
 * (the engines: 113). It is PTX, built by the driver for whatever GPU it
 * finds, and loaded once per process as a library (cuLibraryLoadData),
 * whose kernel runs in any context.
 *
 * A kernel that touches memory it should not kills its context, the
 * application's: only copies within one allocation on each side, known to
 * the driver, come here, and into host memory only where the driver lets
 * the device write.
 */
#include <pthread.h>
#include <stdint.h>

#include "hml_config.h"
#include "hml_cudadrv.h"
#include "hml_kernel.h"
#include "hml_log.h"

/* Larger copies, and misaligned ones past a page, go to the copy engines.
 * Up to 8 MiB a batch takes 40 to 93 % less time here than there, a copy
 * alone at most 6 % more (an H200); larger ones, whose time the engines'
 * cost per copy no longer rules, stay there, and do not hold the
 * application's SMs as long. */
#define MAX_LEN (8 << 20)
#define MAX_MISALIGNED 4096
/* Pinned host memory, read and written over the bus where the host has it:
 * a batch of 16 copies to or from it of up to 32 KiB takes 63 to 88 %
 * less time than the engines one by one; at 128 KiB the engines' batches
 * move 7 to 15 % more (an H200). */
#define MAX_HOST_LEN (32 << 10)
#define THREADS 256
/* Eight blocks for each of an H200's 132 SMs: a copy alone of 2 MiB or
 * more needs them all to keep up with an engine. */
#define BLOCKS_MAX 1024

/*
 * hml_copy(b): copy ctaid.y of b, by the blocks along x together. Where
 * source and destination are equally aligned to 16 bytes, the bytes
 * before the destination's first 16-byte boundary (head) and after the
 * last (tail) are copied one by one, the rest 16 at a time; otherwise
 * every byte is head.
 */
static const char ptx[] =
	".version 7.0\n"
	".target sm_70\n"
	".address_size 64\n"
	".visible .entry hml_copy(.param .align 8 .b8 b[384])\n"
	"{\n"
	"	.reg .pred %p<5>;\n"
	"	.reg .b16 %h<2>;\n"
	"	.reg .b32 %r<12>;\n"
	"	.reg .b64 %d<18>;\n"
	"	mov.u32 %r1, %ctaid.y;\n"
	"	mul.wide.u32 %d1, %r1, 8;\n"
	"	mov.u64 %d2, b;\n"
	"	add.u64 %d2, %d2, %d1;\n"
	"	ld.param.u64 %d3, [%d2];\n"		/* dst */
	"	ld.param.u64 %d4, [%d2+128];\n"		/* src */
	"	ld.param.u64 %d5, [%d2+256];\n"		/* len */
	"	mov.u32 %r2, %ctaid.x;\n"
	"	mov.u32 %r3, %ntid.x;\n"
	"	mov.u32 %r4, %tid.x;\n"
	"	mov.u32 %r5, %nctaid.x;\n"
	"	mad.lo.u32 %r6, %r2, %r3, %r4;\n"
	"	mul.lo.u32 %r7, %r5, %r3;\n"
	"	cvt.u64.u32 %d6, %r6;\n"		/* this thread's first */
	"	cvt.u64.u32 %d7, %r7;\n"		/* threads in all */
	"	xor.b64 %d8, %d3, %d4;\n"
	"	and.b64 %d8, %d8, 15;\n"
	"	setp.ne.u64 %p1, %d8, 0;\n"
	"	neg.s64 %d9, %d3;\n"
	"	and.b64 %d9, %d9, 15;\n"
	"	min.u64 %d9, %d9, %d5;\n"
	"	selp.b64 %d9, %d5, %d9, %p1;\n"		/* head */
	"	sub.u64 %d10, %d5, %d9;\n"
	"	shr.u64 %d10, %d10, 4;\n"		/* 16-byte pieces */
	"	mov.u64 %d11, %d6;\n"
	"vec:\n"
	"	setp.ge.u64 %p2, %d11, %d10;\n"
	"	@%p2 bra bytes;\n"
	"	shl.b64 %d12, %d11, 4;\n"
	"	add.u64 %d12, %d12, %d9;\n"
	"	add.u64 %d13, %d4, %d12;\n"
	"	add.u64 %d14, %d3, %d12;\n"
	"	ld.global.v4.u32 {%r8, %r9, %r10, %r11}, [%d13];\n"
	"	st.global.v4.u32 [%d14], {%r8, %r9, %r10, %r11};\n"
	"	add.u64 %d11, %d11, %d7;\n"
	"	bra vec;\n"
	"bytes:\n"
	"	shl.b64 %d15, %d10, 4;\n"
	"	sub.u64 %d16, %d5, %d15;\n"		/* head + tail */
	"	mov.u64 %d11, %d6;\n"
	"byte:\n"
	"	setp.ge.u64 %p3, %d11, %d16;\n"
	"	@%p3 bra done;\n"
	"	setp.lt.u64 %p4, %d11, %d9;\n"
	"	add.u64 %d17, %d11, %d15;\n"
	"	selp.b64 %d17, %d11, %d17, %p4;\n"	/* tail: past the pieces */
	"	add.u64 %d13, %d4, %d17;\n"
	"	add.u64 %d14, %d3, %d17;\n"
	"	ld.global.u8 %h1, [%d13];\n"
	"	st.global.u8 [%d14], %h1;\n"
	"	add.u64 %d11, %d11, %d7;\n"
	"	bra byte;\n"
	"done:\n"
	"	ret;\n"
	"}\n";

/* The kernel's one parameter. */
struct batch {
	CUdeviceptr dst[HML_KERNEL_BATCH];
	CUdeviceptr src[HML_KERNEL_BATCH];
	uint64_t len[HML_KERNEL_BATCH];
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static CUkernel kernel;
bool hml_kernel_on;

static void load(void)
{
	const char *name = "?";
	CUlibrary lib;
	CUresult r;

	if (!hml_config.kernel)
		return;
	r = hml_cu.library_load(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0);
	if (!r)
		r = hml_cu.library_get_kernel(&kernel, lib, "hml_copy");
	if (r) {
		hml_cu.error_name(r, &name);
		hml_warn("the copy kernel did not load (%s): batches go to the "
			 "copy engines", name);
		return;
	}
	__atomic_store_n(&hml_kernel_on, true, __ATOMIC_RELEASE);
}

bool hml_kernel_ready(void)
{
	pthread_once(&load_once, load);
	return __atomic_load_n(&hml_kernel_on, __ATOMIC_ACQUIRE);
}

/* Does device ordinal reach registered host memory at its host address?
 * (Memory of cuMemHostAlloc it does wherever addressing is unified.)
 * Asked once a device: 1 yes, -1 no. */
static signed char host_ok[64];

static bool host_reached(int ordinal)
{
	signed char ok;
	CUdevice dev;
	int v = 0;

	if (ordinal < 0 || ordinal >= 64)
		return false;
	ok = __atomic_load_n(&host_ok[ordinal], __ATOMIC_RELAXED);
	if (!ok) {
		ok = !hml_cu.device_get(&dev, ordinal) &&
		     !hml_cu.device_attr(&v,
			CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
			dev) && v ? 1 : -1;
		__atomic_store_n(&host_ok[ordinal], ok, __ATOMIC_RELAXED);
	}
	return ok > 0;
}

/* Is [p, p + n) within the allocation m knows, in the copy's context, and
 * is it device memory, or pinned host memory the kernel may read (and
 * write, for a destination)? */
static bool inside(CUdeviceptr p, size_t n, const struct hml_mem *m,
		   const struct hml_mem *where, bool write)
{
	unsigned need = write ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE :
				CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ;

	if (m->dev != where->dev || m->ctx != where->ctx || p < m->start ||
	    p > m->end || n > m->end - p)
		return false;
	return m->type == HML_MEM_DEVICE ||
	       (m->type == HML_MEM_HOST && n <= MAX_HOST_LEN &&
		(m->access & need) == need && host_reached(m->dev));
}

bool hml_kernel_fits(CUdeviceptr dst, const struct hml_mem *dm,
		     CUdeviceptr src, const struct hml_mem *sm, size_t n,
		     const struct hml_mem *where)
{
	return n && n <= MAX_LEN &&
	       (n <= MAX_MISALIGNED || !((dst ^ src) & 15)) &&
	       inside(dst, n, dm, where, true) &&
	       inside(src, n, sm, where, false);
}

CUresult hml_kernel_copy(const CUdeviceptr *dst, const CUdeviceptr *src,
			 const size_t *len, int n, CUstream stream)
{
	struct batch b;
	void *args[] = { &b };
	size_t most = 0;
	unsigned int blocks;

	for (int i = 0; i < n; i++) {
		b.dst[i] = dst[i];
		b.src[i] = src[i];
		b.len[i] = len[i];
		if (len[i] > most)
			most = len[i];
	}
	/* A block for each 16 bytes a thread of the longest copy; past
	 * BLOCKS_MAX, each thread takes several. */
	blocks = (most + THREADS * 16 - 1) / (THREADS * 16);
	if (blocks > BLOCKS_MAX)
		blocks = BLOCKS_MAX;
	return hml_cu.launch((CUfunction) kernel, blocks ? blocks : 1, n, 1,
			     THREADS, 1, 1, 0, stream, args, NULL);
}
