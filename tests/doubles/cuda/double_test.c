/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Self-test of the CUDA driver double.  Run it with the double first on
 * the library path:
 *
 *	LD_LIBRARY_PATH=tests/doubles/cuda/.libs tests/doubles/cuda/double_test
 *
 * One line per check; exit status 0 when all pass.  Checks that need a
 * fresh process (environment read at cuInit) re-execute this program.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuda.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB	(1ULL << 20)
#define GIB	(1ULL << 30)
#define LEN	8192

static int checks, failures;
static CUcontext p0, p1;		/* primary contexts of devices 0, 1 */
static CUstream s1, s2;			/* non-blocking streams */
static unsigned char *pin;		/* pinned bounce buffer, LEN bytes */

static const char *name(CUresult r)
{
	const char *s = NULL;

	cuGetErrorName(r, &s);
	return s ? s : "?";
}

static bool report(bool ok, const char *fmt, ...)
{
	va_list ap;

	checks++;
	failures += !ok;
	printf("%s - ", ok ? "ok" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	return ok;
}

static bool is(CUresult got, CUresult want, const char *what)
{
	if (got == want)
		return report(true, "%s", what);
	return report(false, "%s: got %s, want %s", what, name(got), name(want));
}

/* Setup that later checks depend on: stop at the first failure. */
static void must(CUresult r, const char *what)
{
	if (r != CUDA_SUCCESS) {
		report(false, "%s: %s", what, name(r));
		exit(1);
	}
}

static bool all(const unsigned char *p, size_t n, unsigned char v)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

/* Give device memory a value and make sure it has landed. */
static void fill(CUdeviceptr d, unsigned char v, size_t n)
{
	unsigned char *h = malloc(n);

	memset(h, v, n);
	must(cuMemcpyHtoD(d, h, n), "cuMemcpyHtoD");
	must(cuCtxSynchronize(), "cuCtxSynchronize");
	free(h);
}

/*
 * Read device memory on @s2 only, into pinned memory: this does not
 * synchronise with any other stream, so it shows what has really landed.
 */
static unsigned char peek(CUdeviceptr d)
{
	memset(pin, 0, LEN);
	must(cuMemcpyDtoHAsync(pin, d, LEN, s2), "cuMemcpyDtoHAsync");
	must(cuStreamSynchronize(s2), "cuStreamSynchronize");
	return all(pin, LEN, pin[0]) ? pin[0] : 0xee;
}

/* Does touching @p on the host kill the process with SIGSEGV? */
static bool host_touch_faults(void *p, bool write)
{
	struct rlimit no_core = { 0, 0 };
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		setrlimit(RLIMIT_CORE, &no_core);
		if (write)
			memset(p, 0x5a, 64);
		else
			printf("%d\n", ((volatile unsigned char *)p)[0]);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return false;
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

static void test_before_init(void)
{
	void *fn = NULL;
	int n, v = 0;

	is(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED,
	   "cuDeviceGetCount before cuInit");
	is(cuDriverGetVersion(&v), CUDA_SUCCESS, "cuDriverGetVersion before cuInit");
	report(v == 13000, "driver version is 13000 (%d)", v);
	is(cuGetProcAddress("cuInit", &fn, CUDA_VERSION, 0, NULL), CUDA_SUCCESS,
	   "cuGetProcAddress works before cuInit");
	report(fn == (void *)cuInit, "it finds cuInit");
}

static void test_devices(void)
{
	char nm[64];
	CUuuid u0, u1;
	size_t total;
	int n = 0, v, can;

	must(cuInit(0), "cuInit");
	is(cuDeviceGetCount(&n), CUDA_SUCCESS, "cuDeviceGetCount");
	report(n == 2, "CUDA_DOUBLE_DEVICES=2 gives 2 devices (%d)", n);
	cuDeviceGetName(nm, sizeof(nm), 0);
	report(!strcmp(nm, "CUDA driver double"), "device name \"%s\"", nm);
	cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0);
	report(v == 1, "unified addressing");
	cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1);
	report(v == 1, "PCI bus id of device 1 is 1");
	cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0);
	report(v == 9, "compute capability 9.x");
	cuDeviceGetUuid(&u0, 0);
	cuDeviceGetUuid(&u1, 1);
	report(memcmp(&u0, &u1, sizeof(u0)) != 0, "device UUIDs differ");
	cuDeviceTotalMem(&total, 0);
	report(total == 80 * GIB, "80 GiB per device");
	cuDeviceCanAccessPeer(&can, 0, 1);
	report(can == 1, "device 0 can access device 1");
	cuDeviceCanAccessPeer(&can, 0, 0);
	report(can == 0, "a device is not its own peer");
	is(cuDeviceGet(&v, 2), CUDA_ERROR_INVALID_DEVICE, "no device 2");
}

static void test_no_context(void)
{
	CUcontext c = (CUcontext)1;
	CUdeviceptr d;
	CUstream s;
	CUevent e;
	CUdevice dev;
	char h[16];

	is(cuCtxGetCurrent(&c), CUDA_SUCCESS, "cuCtxGetCurrent without context");
	report(c == NULL, "a new thread has no current context");
	is(cuMemAlloc(&d, 16), CUDA_ERROR_INVALID_CONTEXT, "cuMemAlloc needs a context");
	is(cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_CONTEXT,
	   "cuStreamCreate needs a context");
	is(cuEventCreate(&e, 0), CUDA_ERROR_INVALID_CONTEXT,
	   "cuEventCreate needs a context");
	is(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT,
	   "cuCtxSynchronize needs a context");
	is(cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT,
	   "cuCtxGetDevice needs a context");
	is(cuMemcpy((CUdeviceptr)h, (CUdeviceptr)(h + 8), 8),
	   CUDA_ERROR_INVALID_CONTEXT, "cuMemcpy needs a context");
}

static size_t free_mem(void)
{
	size_t fr = 0, total;

	must(cuMemGetInfo(&fr, &total), "cuMemGetInfo");
	return total - fr;
}

static void test_primary(void)
{
	unsigned flags;
	CUcontext c, again;
	int a0 = -1, a1 = -1;

	cuDevicePrimaryCtxGetState(0, &flags, &a0);
	cuDevicePrimaryCtxGetState(1, &flags, &a1);
	report(!a0 && !a1, "no primary context before the first retain");
	must(cuDevicePrimaryCtxRetain(&p0, 0), "cuDevicePrimaryCtxRetain(0)");
	cuDevicePrimaryCtxGetState(0, &flags, &a0);
	cuDevicePrimaryCtxGetState(1, &flags, &a1);
	report(a0 && !a1, "retain activates device 0 only");
	must(cuCtxSetCurrent(p0), "cuCtxSetCurrent");
	report(free_mem() == 300 * MIB, "one context uses 300 MiB (%zu MiB)",
	       free_mem() / MIB);
	must(cuDevicePrimaryCtxRetain(&again, 0), "second retain");
	report(again == p0 && free_mem() == 300 * MIB,
	       "a second retain returns the same context, no new memory");
	cuDevicePrimaryCtxRelease(0);

	must(cuCtxCreate(&c, NULL, 0, 0), "cuCtxCreate");
	report(free_mem() == 600 * MIB, "cuCtxCreate takes another 300 MiB");
	is(cuCtxDestroy(c), CUDA_SUCCESS, "cuCtxDestroy");
	cuCtxGetCurrent(&again);
	report(again == p0 && free_mem() == 300 * MIB,
	       "destroy pops the context and gives the memory back");

	must(cuDevicePrimaryCtxRetain(&p1, 1), "cuDevicePrimaryCtxRetain(1)");
	must(cuCtxPushCurrent(p1), "cuCtxPushCurrent");
	report(free_mem() == 300 * MIB, "device 1 holds just its primary context");
	cuCtxPopCurrent(NULL);
	must(cuDevicePrimaryCtxRetain(&c, 1), "retain(1) again");
	cuDevicePrimaryCtxRelease(1);
	cuDevicePrimaryCtxGetState(1, &flags, &a1);
	report(a1 == 1, "still active while retained");
}

static void test_stack(void)
{
	CUcontext c = NULL;
	CUdevice dev = -1;

	must(cuCtxPushCurrent(p1), "push p1");
	cuCtxGetDevice(&dev);
	report(dev == 1, "pushed context is current");
	is(cuCtxPopCurrent(&c), CUDA_SUCCESS, "cuCtxPopCurrent");
	report(c == p1, "pop returns the pushed context");
	cuCtxGetDevice(&dev);
	report(dev == 0, "pop restores the previous context");
	cuCtxPopCurrent(&c);
	cuCtxGetCurrent(&c);
	report(c == NULL, "popping the last leaves none");
	is(cuCtxPopCurrent(&c), CUDA_ERROR_INVALID_CONTEXT,
	   "pop of an empty stack");
	must(cuCtxSetCurrent(p0), "cuCtxSetCurrent");
}

static void *thread_view(void *arg)
{
	CUcontext c = (CUcontext)1;
	CUdeviceptr d;
	CUdevice dev = -1;
	bool *ok = arg;

	cuCtxGetCurrent(&c);
	ok[0] = c == NULL;
	ok[1] = cuMemAlloc(&d, 16) == CUDA_ERROR_INVALID_CONTEXT;
	cuCtxSetCurrent(p1);
	cuCtxGetDevice(&dev);
	ok[2] = dev == 1;
	return NULL;
}

static pthread_barrier_t step;

static void *thread_doomed(void *arg)
{
	CUdeviceptr d;

	cuCtxSetCurrent(arg);
	pthread_barrier_wait(&step);	/* the main thread destroys it */
	pthread_barrier_wait(&step);
	return (void *)(uintptr_t)cuMemAlloc(&d, 16);
}

static void test_threads(void)
{
	bool ok[3] = { false, false, false };
	CUcontext c;
	pthread_t t;
	void *ret;

	pthread_create(&t, NULL, thread_view, ok);
	pthread_join(t, NULL);
	report(ok[0], "another thread starts without a current context");
	report(ok[1], "and cannot allocate");
	report(ok[2], "it sets its own context");
	cuCtxGetCurrent(&c);
	report(c == p0, "without changing this thread's");

	must(cuCtxCreate(&c, NULL, 0, 0), "cuCtxCreate");
	cuCtxPopCurrent(NULL);
	pthread_barrier_init(&step, NULL, 2);
	pthread_create(&t, NULL, thread_doomed, c);
	pthread_barrier_wait(&step);
	is(cuCtxDestroy(c), CUDA_SUCCESS, "destroy a context current elsewhere");
	pthread_barrier_wait(&step);
	pthread_join(t, &ret);
	is((CUresult)(uintptr_t)ret, CUDA_ERROR_CONTEXT_IS_DESTROYED,
	   "that thread then gets CONTEXT_IS_DESTROYED");
	pthread_barrier_destroy(&step);
}

static void test_protection(void)
{
	struct iovec local, remote;
	unsigned char host[64];
	CUdeviceptr d, e;
	void *m = malloc(LEN);
	ssize_t n;
	int fd[2];

	memset(host, 0, sizeof(host));
	must(cuMemAlloc(&d, LEN), "cuMemAlloc");
	must(cuMemAlloc(&e, 100), "cuMemAlloc");
	report(d % sysconf(_SC_PAGESIZE) == 0 && e % sysconf(_SC_PAGESIZE) == 0,
	       "device allocations are page aligned");
	report((uintptr_t)m + LEN <= d || d + LEN <= (uintptr_t)m,
	       "device memory does not overlap the heap");
	report(host_touch_faults((void *)d, true),
	       "host memset into cuMemAlloc memory dies with SIGSEGV");
	report(host_touch_faults((void *)e, false),
	       "host read of cuMemAlloc memory dies with SIGSEGV");
	if (pipe(fd))
		return;
	errno = 0;
	n = write(fd[1], (void *)d, 16);
	report(n < 0 && errno == EFAULT, "write(2) from device memory: EFAULT");
	n = write(fd[1], host, 16);
	errno = 0;
	n = read(fd[0], (void *)d, 16);
	report(n < 0 && errno == EFAULT, "read(2) into device memory: EFAULT");
	close(fd[0]);
	close(fd[1]);

	local.iov_base = (void *)d;
	local.iov_len = 16;
	remote.iov_base = host;
	remote.iov_len = 16;
	errno = 0;
	n = process_vm_writev(getpid(), &local, 1, &remote, 1, 0);
	if (n < 0 && (errno == EPERM || errno == ENOSYS))
		report(true, "process_vm_writev: skipped, not permitted here");
	else
		report(n < 0 && errno == EFAULT,
		       "process_vm_writev from device memory: EFAULT");
	cuMemFree(e);
	cuMemFree(d);
	free(m);
}

static void test_roundtrip(void)
{
	unsigned char *h = malloc(LEN), *back = malloc(LEN);
	uint32_t w[4];
	CUdeviceptr d;
	size_t i;

	for (i = 0; i < LEN; i++)
		h[i] = i * 7 + 3;
	must(cuMemAlloc(&d, LEN), "cuMemAlloc");
	is(cuMemcpyHtoD(d, h, LEN), CUDA_SUCCESS, "cuMemcpyHtoD");
	memset(back, 0, LEN);
	is(cuMemcpyDtoH(back, d, LEN), CUDA_SUCCESS, "cuMemcpyDtoH");
	report(!memcmp(h, back, LEN), "HtoD then DtoH is byte-exact");

	/* pageable source: staged at the call, the DMA lands later */
	memset(h, 0x11, LEN);
	cuMemcpyHtoD(d, h, LEN);
	memset(h, 0x22, LEN);
	cuMemcpyDtoH(back, d, LEN);
	report(all(back, LEN, 0x11), "a pageable HtoD source is copied at the call");

	memset(back, 0, LEN);
	is(cuMemcpy((CUdeviceptr)back, d, LEN), CUDA_SUCCESS,
	   "cuMemcpy with unified addressing");
	report(all(back, LEN, 0x11), "cuMemcpy device to host");

	cuMemsetD32(d, 0x01020304, LEN / 4);
	cuMemcpyDtoH(w, d, sizeof(w));
	report(w[0] == 0x01020304 && w[3] == 0x01020304, "cuMemsetD32");
	cuMemsetD16(d, 0xabcd, LEN / 2);
	cuMemcpyDtoH(back, d, 4);
	report(back[0] == 0xcd && back[1] == 0xab, "cuMemsetD16");
	is(cuMemsetD32(d + 2, 0, 1), CUDA_ERROR_INVALID_VALUE,
	   "misaligned cuMemsetD32");
	is(cuMemcpyHtoD(d, h, LEN + 1), CUDA_ERROR_INVALID_VALUE,
	   "a copy past the end of an allocation");
	cuMemFree(d);
	free(h);
	free(back);
}

static void test_lateness(void)
{
	unsigned char *h = malloc(LEN);
	CUdeviceptr a, b, c;

	must(cuMemAlloc(&a, LEN), "cuMemAlloc");
	must(cuMemAlloc(&b, LEN), "cuMemAlloc");
	must(cuMemAlloc(&c, LEN), "cuMemAlloc");
	fill(a, 0xaa, LEN);
	fill(b, 0xbb, LEN);
	fill(c, 0xcc, LEN);

	is(cuMemcpyDtoDAsync(b, a, LEN, s1), CUDA_SUCCESS, "D2D cuMemcpyDtoDAsync");
	report(peek(b) == 0xbb, "a D2D copy has not landed before its stream syncs");
	cuStreamSynchronize(s1);
	report(peek(b) == 0xaa, "cuStreamSynchronize performs it");

	cuMemcpyAsync(b, c, LEN, s1);
	is(cuStreamQuery(s1), CUDA_ERROR_NOT_READY, "cuStreamQuery: NOT_READY");
	report(peek(b) == 0xaa, "not landed while NOT_READY");
	is(cuStreamQuery(s1), CUDA_SUCCESS, "cuStreamQuery: then SUCCESS");
	report(peek(b) == 0xcc, "landed after SUCCESS");

	is(cuMemcpy(b, a, LEN), CUDA_SUCCESS, "D2D cuMemcpy");
	report(peek(b) == 0xcc, "a synchronous D2D cuMemcpy returns early");
	is(cuStreamQuery(NULL), CUDA_ERROR_NOT_READY,
	   "the legacy stream has it queued");
	cuMemcpyDtoH(h, b, LEN);
	report(all(h, LEN, 0xaa), "a DtoH on the legacy stream performs it first");

	cuMemsetD8(b, 0x5e, LEN);
	report(peek(b) == 0xaa, "a synchronous device memset returns early");
	cuCtxSynchronize();
	report(peek(b) == 0x5e, "it lands on cuCtxSynchronize");
	cuMemsetD8Async(b, 0x5f, LEN, s1);
	report(peek(b) == 0x5e, "an async memset is late");
	cuStreamSynchronize(s1);
	report(peek(b) == 0x5f, "until its stream syncs");

	memset(h, 0x11, LEN);
	cuMemcpyHtoDAsync(b, h, LEN, s1);
	memset(h, 0x22, LEN);
	cuStreamSynchronize(s1);
	report(peek(b) == 0x11, "an async pageable HtoD snapshots its source");

	memset(pin, 0x33, LEN);
	cuMemcpyHtoDAsync(b, pin, LEN, s1);
	memset(pin, 0x44, LEN);
	cuStreamSynchronize(s1);
	report(peek(b) == 0x44, "an async pinned HtoD reads its source late (DMA)");

	memset(h, 0, LEN);
	cuMemcpyDtoHAsync(h, a, LEN, s1);
	report(all(h, LEN, 0xaa), "an async DtoH to pageable memory completes on return");
	{
		unsigned char *p2;

		must(cuMemAllocHost((void **)&p2, LEN), "cuMemAllocHost");
		memset(p2, 0, LEN);
		cuMemcpyDtoHAsync(p2, a, LEN, s1);
		report(all(p2, LEN, 0), "an async DtoH to pinned memory is late");
		cuStreamSynchronize(s1);
		report(all(p2, LEN, 0xaa), "and lands on synchronisation");
		cuMemcpyDtoHAsync(p2, a, LEN, s1);
		is(cuMemFreeHost(p2), CUDA_SUCCESS,
		   "cuMemFreeHost with a copy into it pending");
	}
	cuMemFree(a);
	cuMemFree(b);
	cuMemFree(c);
	free(h);
}

/* cuMemcpyBatchAsync (13.0): checked whole, late like any async copy,
 * its copies in no promised order (the double runs them last first). */
/* Three buffers, a's bytes 0xaN, b's 0xbN and c's 0xcN. */
static void abc(CUdeviceptr *a, CUdeviceptr *b, CUdeviceptr *c, int n)
{
	must(cuMemAlloc(a, LEN), "cuMemAlloc");
	must(cuMemAlloc(b, LEN), "cuMemAlloc");
	must(cuMemAlloc(c, LEN), "cuMemAlloc");
	fill(*a, 0xa0 + n, LEN);
	fill(*b, 0xb0 + n, LEN);
	fill(*c, 0xc0 + n, LEN);
}

static void free_abc(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c)
{
	cuMemFree(a);
	cuMemFree(b);
	cuMemFree(c);
}

static void test_batch(void)
{
	CUmemcpyAttributes attr = {
		.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
	}, bad = attr;
	CUdeviceptr a, b, c, dsts[2], srcs[2];
	size_t sizes[2] = { LEN, LEN }, first = 0, late = 1;

	abc(&a, &b, &c, 1);
	dsts[0] = b;
	srcs[0] = a;
	dsts[1] = c;
	srcs[1] = b;
	bad.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
	is(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 1, &bad, &first, 1, s1),
	   CUDA_ERROR_INVALID_VALUE, "a batch without a source access order");
	is(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 1, &attr, &late, 1, s1),
	   CUDA_ERROR_INVALID_VALUE, "a batch whose first attribute is not "
	   "at copy 0");
	is(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 1, &attr, &first, 1,
				 CU_STREAM_LEGACY),
	   CUDA_ERROR_INVALID_VALUE, "a batch on the legacy stream");
	sizes[1] = LEN + 1;
	is(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 2, &attr, &first, 1, s1),
	   CUDA_ERROR_INVALID_VALUE, "a batch with a copy past an allocation");
	report(peek(b) == 0xb1 && cuStreamQuery(s1) == CUDA_SUCCESS,
	   "a refused batch queues none of its copies");
	sizes[1] = LEN;
	/* b = a, then c = b: in stream order c ends as a's bytes */
	is(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 2, &attr, &first, 1, s1),
	   CUDA_SUCCESS, "cuMemcpyBatchAsync");
	report(peek(b) == 0xb1 && peek(c) == 0xc1,
	       "a batch has not landed before its stream syncs");
	cuStreamSynchronize(s1);
	report(peek(b) == 0xa1 && peek(c) == 0xb1, "its copies ran last "
	       "first: c = b, then b = a");
	free_abc(a, b, c);
}

/* hmemloop's copy kernel: its parameter is 16 destinations, 16 sources
 * and 16 lengths; gridDim.y copies of it run, in no order. */
static void test_kernel(void)
{
	static const char ptx[] = ".version 7.0\n.target sm_70\n"
				  ".entry hml_copy(.param .b8 b[384]) {}\n";
	struct { CUdeviceptr d[16], s[16]; uint64_t n[16]; } p = { 0 };
	void *args[] = { &p };
	CUdeviceptr a, b, c;
	CUlibrary lib;
	CUkernel k;

	abc(&a, &b, &c, 2);
	is(cuLibraryLoadData(&lib, "\x7f" "ELF", NULL, NULL, 0, NULL, NULL, 0),
	   CUDA_ERROR_INVALID_IMAGE, "a library that is not PTX text");
	must(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0),
	     "cuLibraryLoadData");
	is(cuLibraryGetKernel(&k, lib, "other"), CUDA_ERROR_NOT_FOUND,
	   "a kernel the library lacks");
	must(cuLibraryGetKernel(&k, lib, "hml_copy"), "cuLibraryGetKernel");
	/* b = a, then c = b: in no order, the double's last first */
	p.d[0] = b;
	p.s[0] = a;
	p.n[0] = LEN;
	p.d[1] = c;
	p.s[1] = b;
	p.n[1] = LEN;
	is(cuLaunchKernel((CUfunction) k, 1, 17, 1, 256, 1, 1, 0, s1, args,
			  NULL), CUDA_ERROR_INVALID_VALUE,
	   "a launch of more copies than the parameter has");
	must(cuLaunchKernel((CUfunction) k, 1, 2, 1, 256, 1, 1, 0, s1, args,
			    NULL), "cuLaunchKernel");
	report(peek(b) == 0xb2 && peek(c) == 0xc2,
	       "a launch has not landed before its stream syncs");
	cuStreamSynchronize(s1);
	report(peek(b) == 0xa2 && peek(c) == 0xb2, "its copies ran last "
	       "first: c = b, then b = a");
	must(cuLibraryUnload(lib), "cuLibraryUnload");
	free_abc(a, b, c);
}

static void test_legacy(void)
{
	const cuuint64_t per_thread = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
	CUresult (*copy_pt)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*sync_pt)(CUstream);
	unsigned char *h = malloc(LEN);
	CUdeviceptr a, b;
	void *fn = NULL;
	CUstream sb;

	must(cuStreamCreate(&sb, CU_STREAM_DEFAULT), "blocking stream");
	must(cuMemAlloc(&a, LEN), "cuMemAlloc");
	must(cuMemAlloc(&b, LEN), "cuMemAlloc");
	fill(a, 0x0a, LEN);
	fill(b, 0x0b, LEN);

	cuMemcpyDtoDAsync(b, a, LEN, sb);
	cuMemcpyDtoH(h, b, LEN);
	report(all(h, LEN, 0x0a),
	       "legacy stream work waits for earlier blocking-stream work");

	fill(b, 0x0b, LEN);
	cuMemcpyDtoDAsync(b, a, LEN, s1);
	cuMemcpyDtoH(h, b, LEN);
	report(all(h, LEN, 0x0b), "but not for non-blocking streams");
	cuStreamSynchronize(s1);

	fill(b, 0x0b, LEN);
	cuMemcpy(b, a, LEN);
	memset(pin, 0, LEN);
	cuMemcpyDtoHAsync(pin, b, LEN, sb);
	cuStreamSynchronize(sb);
	report(all(pin, LEN, 0x0a),
	       "blocking-stream work waits for earlier legacy work");
	cuStreamDestroy(sb);
	is(cuStreamSynchronize(sb), CUDA_ERROR_INVALID_HANDLE,
	   "a destroyed stream is refused");

	/* the per-thread default stream is a blocking stream too */
	fill(b, 0x0b, LEN);
	cuGetProcAddress("cuMemcpyAsync", &fn, CUDA_VERSION, per_thread, NULL);
	*(void **)&copy_pt = fn;
	cuGetProcAddress("cuStreamSynchronize", &fn, CUDA_VERSION, per_thread,
			 NULL);
	*(void **)&sync_pt = fn;
	cuMemcpy(b, a, LEN);
	memset(pin, 0, LEN);
	is(copy_pt((CUdeviceptr)pin, b, LEN, NULL), CUDA_SUCCESS,
	   "cuMemcpyAsync_ptsz on the per-thread stream");
	is(sync_pt(NULL), CUDA_SUCCESS, "cuStreamSynchronize_ptsz");
	report(all(pin, LEN, 0x0a),
	       "per-thread stream work waits for earlier legacy work");
	cuMemFree(a);
	cuMemFree(b);
	free(h);
}

static void test_events(void)
{
	CUdeviceptr a, b;
	CUevent e, e2;
	float ms = -1;

	must(cuEventCreate(&e, 0), "cuEventCreate");
	must(cuEventCreate(&e2, 0), "cuEventCreate");
	must(cuMemAlloc(&a, LEN), "cuMemAlloc");
	must(cuMemAlloc(&b, LEN), "cuMemAlloc");
	fill(a, 0xa1, LEN);
	fill(b, 0xb1, LEN);

	cuMemcpyDtoDAsync(b, a, LEN, s1);
	cuEventRecord(e, s1);
	is(cuEventQuery(e), CUDA_ERROR_NOT_READY, "cuEventQuery: NOT_READY");
	report(peek(b) == 0xb1, "not landed while the event is pending");
	is(cuEventQuery(e), CUDA_SUCCESS, "cuEventQuery: then SUCCESS");
	report(peek(b) == 0xa1, "landed once the event completed");

	fill(b, 0xb1, LEN);
	cuMemcpyDtoDAsync(b, a, LEN, s1);
	cuEventRecord(e, s1);
	cuStreamWaitEvent(s2, e, 0);
	report(peek(b) == 0xa1, "cuStreamWaitEvent orders the other stream after it");

	fill(b, 0xb1, LEN);
	cuEventRecord(e2, s1);
	cuMemcpyDtoDAsync(b, a, LEN, s1);
	cuEventRecord(e, s1);
	is(cuEventSynchronize(e), CUDA_SUCCESS, "cuEventSynchronize");
	report(peek(b) == 0xa1, "cuEventSynchronize performs earlier work");
	is(cuEventElapsedTime(&ms, e2, e), CUDA_SUCCESS, "cuEventElapsedTime");
	report(ms >= 0, "elapsed time is not negative (%.3f ms)", ms);

	fill(b, 0xb1, LEN);
	cuMemcpyDtoDAsync(b, a, LEN, s1);
	is(cuMemFree(a), CUDA_SUCCESS, "cuMemFree of a buffer with a copy pending");
	report(peek(b) == 0xa1, "freeing a source performs the pending copy");
	cuEventDestroy(e);
	cuEventDestroy(e2);
	cuMemFree(b);
}

static void test_sync_memops(void)
{
	unsigned one = 1, got = 0;
	CUdeviceptr a, b;

	must(cuMemAlloc(&a, LEN), "cuMemAlloc");
	must(cuMemAlloc(&b, LEN), "cuMemAlloc");
	fill(a, 0x5a, LEN);
	fill(b, 0x5b, LEN);
	is(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, b),
	   CUDA_SUCCESS, "set SYNC_MEMOPS");
	cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, b);
	report(got == 1, "SYNC_MEMOPS reads back");
	cuMemcpy(b, a, LEN);
	report(peek(b) == 0x5a, "with SYNC_MEMOPS a D2D cuMemcpy completes on return");

	fill(a, 0x6a, LEN);
	cuCtxSetFlags(CU_CTX_SYNC_MEMOPS);
	cuMemcpy(a, b, LEN);
	report(peek(a) == 0x5a, "so it does in a CU_CTX_SYNC_MEMOPS context");
	cuCtxSetFlags(0);
	cuMemFree(a);
	cuMemFree(b);
}

static void test_attributes(void)
{
	CUpointer_attribute at[4] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
		CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
	};
	unsigned type = 9, managed = 9, flags;
	unsigned long long id1 = 0, id2 = 0;
	CUcontext ctx = (CUcontext)1;
	int ord = 9, stack_var = 0;
	void *data[4] = { &type, &ctx, &managed, &ord };
	CUdeviceptr d, d2, base = 0, m, dp = 0;
	size_t size = 0;
	void *hp = NULL, *host = malloc(LEN), *pinned, *pinned2;

	must(cuMemAlloc(&d, LEN), "cuMemAlloc");
	must(cuMemAlloc(&d2, LEN), "cuMemAlloc");
	cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 100);
	cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, d);
	cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d);
	report(type == CU_MEMORYTYPE_DEVICE && ctx == p0 && ord == 0,
	       "cuMemAlloc: device memory of the allocating context");
	is(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, d),
	   CUDA_ERROR_INVALID_VALUE, "device memory has no host pointer");
	cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 100);
	cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d + 100);
	report(base == d && size == LEN, "range start and size");
	cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, d);
	cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, d2);
	report(id1 && id2 && id1 != id2, "buffer ids differ");
	base = size = 0;
	cuMemGetAddressRange(&base, &size, d + 100);
	report(base == d && size == LEN, "cuMemGetAddressRange");
	type = 9;
	ctx = NULL;
	is(cuPointerGetAttributes(4, at, data, d), CUDA_SUCCESS,
	   "cuPointerGetAttributes on device memory");
	report(type == CU_MEMORYTYPE_DEVICE && ctx == p0 && !managed && ord == 0,
	       "all four attributes right");

	must(cuMemAllocHost(&pinned, LEN), "cuMemAllocHost");
	cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
			      (CUdeviceptr)pinned);
	cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER,
			      (CUdeviceptr)pinned);
	cuMemHostGetDevicePointer(&dp, pinned, 0);
	report(type == CU_MEMORYTYPE_HOST && hp == pinned &&
	       dp == (CUdeviceptr)pinned,
	       "pinned memory: host memory, same address on the device");
	cuMemFreeHost(pinned);
	must(cuMemAllocHost(&pinned2, LEN), "cuMemAllocHost");

	must(cuMemHostRegister(host, LEN, 0), "cuMemHostRegister");
	type = 0;
	cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
			      (CUdeviceptr)host);
	report(type == CU_MEMORYTYPE_HOST, "registered memory is host memory");
	flags = 0;
	is(cuMemHostGetFlags(&flags, host), CUDA_SUCCESS,
	   "registered memory has flags, as allocated memory has");
	report(flags == CU_MEMHOSTALLOC_DEVICEMAP, "mapped, they say (%u)",
	       flags);
	is(cuMemHostRegister(host, LEN, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
	   "registering twice");
	is(cuMemHostUnregister(host), CUDA_SUCCESS, "cuMemHostUnregister");
	/* As an H200 answers (driver 580). */
	must(cuMemHostRegister(host, LEN, CU_MEMHOSTREGISTER_READ_ONLY),
	     "cuMemHostRegister read-only");
	for (int i = 0; i < 2; i++) {
		unsigned acc = 9;
		void *accp[] = { &acc };
		CUpointer_attribute aa = CU_POINTER_ATTRIBUTE_ACCESS_FLAGS;

		cuPointerGetAttributes(1, &aa, accp,
				       (CUdeviceptr)(i ? host : pinned2));
		report(acc == (i ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ :
				   CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE),
		       i ? "registered read-only: the device may read it" :
			   "pinned memory: the device may read and write it");
	}
	is(cuMemHostUnregister(host), CUDA_SUCCESS, "cuMemHostUnregister");

	must(cuMemAllocManaged(&m, LEN, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
	memset((void *)m, 0x4d, LEN);
	type = 0;
	managed = 0;
	cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, m);
	cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m);
	report(type == CU_MEMORYTYPE_DEVICE && managed == 1,
	       "managed memory: device memory, IS_MANAGED, host-writable");
	report(peek(m) == 0x4d, "the device sees what the host wrote");
	cuMemFree(m);

	is(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				 (CUdeviceptr)host),
	   CUDA_ERROR_INVALID_VALUE, "malloc memory: cuPointerGetAttribute refuses");
	is(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				 (CUdeviceptr)&stack_var),
	   CUDA_ERROR_INVALID_VALUE, "stack memory: cuPointerGetAttribute refuses");
	type = 9;
	ctx = (CUcontext)1;
	managed = 9;
	is(cuPointerGetAttributes(4, at, data, (CUdeviceptr)host), CUDA_SUCCESS,
	   "malloc memory: cuPointerGetAttributes succeeds");
	report(type == 0 && ctx == NULL && managed == 0,
	       "with memory type 0 and no context (ordinal %d)", ord);
	cuMemFree(d);
	cuMemFree(d2);
	cuMemFreeHost(pinned2);
	free(host);
}

static void test_vmm(void)
{
	CUmemAllocationProp prop = { 0 };
	CUmemAccessDesc acc = { 0 };
	CUmemGenericAllocationHandle h1, h2;
	unsigned char *src = malloc(3 * MIB), *dst = malloc(3 * MIB);
	CUdeviceptr va, base = 0;
	unsigned type = 0, mapped = 9, one = 1;
	CUcontext ctx = (CUcontext)1;
	size_t g = 0, size = 0, i;
	int ord = -1, fd[2];
	ssize_t n;

	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 1;
	is(cuMemGetAllocationGranularity(&g, &prop,
					 CU_MEM_ALLOC_GRANULARITY_MINIMUM),
	   CUDA_SUCCESS, "cuMemGetAllocationGranularity");
	report(g == 2 * MIB, "granularity 2 MiB");
	must(cuMemCreate(&h1, 2 * g, &prop, 0), "cuMemCreate");
	must(cuMemCreate(&h2, 2 * g, &prop, 0), "cuMemCreate");
	must(cuMemAddressReserve(&va, 4 * g, 0, 0, 0), "cuMemAddressReserve");
	must(cuMemMap(va, 2 * g, 0, h1, 0), "cuMemMap");
	must(cuMemMap(va + 2 * g, 2 * g, 0, h2, 0), "cuMemMap");
	for (i = 0; i < 3 * MIB; i++)
		src[i] = i % 251;
	is(cuMemcpyHtoD(va + g, src, 3 * MIB), CUDA_ERROR_INVALID_VALUE,
	   "VMM memory is unusable before cuMemSetAccess");
	acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	acc.location.id = 0;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	is(cuMemSetAccess(va, 4 * g, &acc, 1), CUDA_SUCCESS, "cuMemSetAccess");
	is(cuMemcpyHtoD(va + g, src, 3 * MIB), CUDA_SUCCESS,
	   "HtoD across two mappings");
	cuMemcpyDtoH(dst, va + g, 3 * MIB);
	report(!memcmp(src, dst, 3 * MIB), "VMM round trip is byte-exact");
	report(host_touch_faults((void *)va, true),
	       "host memset into VMM memory dies with SIGSEGV");
	if (!pipe(fd)) {
		errno = 0;
		n = write(fd[1], (void *)va, 16);
		report(n < 0 && errno == EFAULT, "write(2) from VMM memory: EFAULT");
		close(fd[0]);
		close(fd[1]);
	}
	cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va);
	cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, va);
	cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va);
	report(type == CU_MEMORYTYPE_DEVICE && ctx == NULL && ord == 1,
	       "VMM: device memory, no context, the handle's device");
	cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + g);
	cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, va + g);
	report(base == va && size == 4 * g, "VMM range is the reservation");
	base = size = 0;
	cuMemGetAddressRange(&base, &size, va + 3 * g);
	report(base == va + 2 * g && size == 2 * g,
	       "cuMemGetAddressRange gives the mapping");
	is(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, va),
	   CUDA_ERROR_NOT_SUPPORTED, "SYNC_MEMOPS is not supported on VMM memory");
	is(cuMemUnmap(va + 2 * g, 2 * g), CUDA_SUCCESS, "cuMemUnmap");
	cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, va + 3 * g);
	report(mapped == 0, "unmapped reservation reads as not mapped");
	is(cuMemUnmap(va, 2 * g), CUDA_SUCCESS, "cuMemUnmap");
	is(cuMemRelease(h1), CUDA_SUCCESS, "cuMemRelease");
	is(cuMemRelease(h2), CUDA_SUCCESS, "cuMemRelease");
	is(cuMemAddressFree(va, 4 * g), CUDA_SUCCESS, "cuMemAddressFree");
	free(src);
	free(dst);
}

static void test_two_devices(void)
{
	CUdeviceptr d0, d1;
	CUcontext ctx = NULL;
	int ord = -1;

	must(cuMemAlloc(&d0, LEN), "cuMemAlloc on device 0");
	must(cuCtxPushCurrent(p1), "push p1");
	must(cuMemAlloc(&d1, LEN), "cuMemAlloc on device 1");
	fill(d1, 0xd1, LEN);
	cuCtxPopCurrent(NULL);
	fill(d0, 0xd0, LEN);
	cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d1);
	cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, d1);
	report(ord == 1 && ctx == p1, "device 1 memory belongs to device 1");
	report(d0 > d1 ? d0 - d1 >= 80 * GIB : d1 - d0 >= 80 * GIB,
	       "each device has its own address range");
	is(cuMemcpyPeer(d1, p1, d0, p0, LEN), CUDA_SUCCESS, "cuMemcpyPeer");
	report(peek(d1) == 0xd1, "cuMemcpyPeer returns before the bytes move");
	cuCtxSynchronize();
	report(peek(d1) == 0xd0, "they move on cuCtxSynchronize");
	fill(d0, 0xd2, LEN);
	is(cuMemcpyPeerAsync(d1, p1, d0, p0, LEN, s1), CUDA_SUCCESS,
	   "cuMemcpyPeerAsync");
	report(peek(d1) == 0xd0, "late");
	cuStreamSynchronize(s1);
	report(peek(d1) == 0xd2, "until its stream syncs");
	cuMemFree(d0);
	cuMemFree(d1);
}

static void test_proc(void)
{
	CUdriverProcAddressQueryResult st = 99;
	CUresult (*old)(const char *, void **, int, cuuint64_t);
	CUresult (*copy)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	unsigned char a[8] = "abcdefg", b[8] = { 0 };
	void *fn = NULL;

	is(cuGetProcAddress("cuMemcpyAsync", &fn, CUDA_VERSION, 0, &st),
	   CUDA_SUCCESS, "cuGetProcAddress_v2 finds cuMemcpyAsync");
	report(fn == (void *)cuMemcpyAsync && st == CU_GET_PROC_ADDRESS_SUCCESS,
	       "the same function");
	copy = (CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream))fn;
	copy((CUdeviceptr)b, (CUdeviceptr)a, 8, NULL);
	report(!memcmp(a, b, 8), "and it copies");
	is(cuGetProcAddress("cuPointerGetAttributes", &fn, CUDA_VERSION, 0, &st),
	   CUDA_SUCCESS, "cuGetProcAddress_v2 finds cuPointerGetAttributes");
	report(fn == (void *)cuPointerGetAttributes, "the same function");
	cuGetProcAddress("cuMemAlloc", &fn, CUDA_VERSION, 0, &st);
	report(fn == (void *)cuMemAlloc, "cuMemAlloc resolves to cuMemAlloc_v2");
	cuGetProcAddress("cuCtxGetDevice", &fn, 12080, 0, &st);
	report(fn == (void *)cuCtxGetDevice, "cuCtxGetDevice at 12.8 is the old one");
	cuGetProcAddress("cuCtxGetDevice", &fn, 13000, 0, &st);
	report(fn == (void *)cuCtxGetDevice_v2, "and at 13.0 the _v2");
	fn = (void *)1;
	is(cuGetProcAddress("cuNoSuchFunction", &fn, CUDA_VERSION, 0, &st),
	   CUDA_ERROR_NOT_FOUND, "an unknown name");
	report(!fn && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
	       "SYMBOL_NOT_FOUND and no pointer");
	is(cuGetProcAddress("cuMemAlloc", &fn, 3000, 0, &st), CUDA_ERROR_NOT_FOUND,
	   "cuMemAlloc for CUDA 3.0 (32-bit API, not in the double)");
	report(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
	       "VERSION_NOT_SUFFICIENT");
	cuGetProcAddress("cuMemcpy", &fn, CUDA_VERSION,
			 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st);
	report(fn && fn != (void *)cuMemcpy, "per-thread flag gives cuMemcpy_ptds");
	*(void **)&old = dlsym(RTLD_DEFAULT, "cuGetProcAddress");
	report(old && old("cuStreamQuery", &fn, CUDA_VERSION, 0) == CUDA_SUCCESS &&
	       fn == (void *)cuStreamQuery, "the 4-argument cuGetProcAddress");
}

static void test_errors(void)
{
	const char *s = NULL;

	cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s);
	report(s && !strcmp(s, "CUDA_ERROR_ILLEGAL_ADDRESS"), "cuGetErrorName");
	s = NULL;
	cuGetErrorString(CUDA_ERROR_NOT_READY, &s);
	report(s && *s, "cuGetErrorString (\"%s\")", s ? s : "");
	is(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE,
	   "an unknown code");
}

struct worker {
	CUdeviceptr a, b;
	CUstream s;
	int rounds;
	bool sync;	/* synchronizes s and the context instead of copying */
	bool ok;
};

static bool work_once(struct worker *w)
{
	if (w->sync)
		return cuStreamSynchronize(w->s) == CUDA_SUCCESS &&
		       cuCtxSynchronize() == CUDA_SUCCESS;
	return cuMemcpyDtoDAsync(w->b, w->a, LEN, w->s) == CUDA_SUCCESS;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	int i;

	w->ok = cuCtxSetCurrent(p0) == CUDA_SUCCESS;
	for (i = 0; i < w->rounds && w->ok; i++)
		w->ok = work_once(w);
	return NULL;
}

/* A reset keeps the primary context's handle and its references: the
 * handle still pushes, and calls in it fail until it is retained again
 * (as on an H200). */
static void test_reset(void)
{
	unsigned long long id, id2;
	CUdeviceptr p;
	CUcontext c;

	must(cuCtxGetId(p1, &id), "cuCtxGetId");
	must(cuDevicePrimaryCtxReset(1), "cuDevicePrimaryCtxReset(1)");
	is(cuCtxGetId(p1, &id2), CUDA_ERROR_CONTEXT_IS_DESTROYED,
	   "a reset primary context has no ID");
	is(cuCtxPushCurrent(p1), CUDA_SUCCESS,
	   "a reset primary context still pushes");
	is(cuMemAlloc(&p, 64), CUDA_ERROR_CONTEXT_IS_DESTROYED,
	   "calls in it fail");
	must(cuDevicePrimaryCtxRetain(&c, 1), "retain after the reset");
	report(c == p1, "the retain gives the same handle");
	must(cuCtxGetId(p1, &id2), "cuCtxGetId after the retain");
	report(id2 != id, "and a new ID");
	is(cuMemAlloc(&p, 64), CUDA_SUCCESS, "calls in it work again");
	cuMemFree(p);
	cuCtxPopCurrent(NULL);
	cuDevicePrimaryCtxRelease(1);
}

static void test_concurrency(void)
{
	struct worker w[4];
	pthread_t t[4];
	CUstream s;
	int i;

	must(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	for (i = 0; i < 4; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].s = s;
		w[i].rounds = 500;
		w[i].sync = i % 2;
		must(cuMemAlloc(&w[i].a, LEN), "cuMemAlloc");
		must(cuMemAlloc(&w[i].b, LEN), "cuMemAlloc");
		fill(w[i].a, 0x10 + i, LEN);
	}
	alarm(60);	/* a deadlock fails the test instead of hanging it */
	for (i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, work, &w[i]);
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	alarm(0);
	cuStreamSynchronize(s);
	report(w[0].ok && w[1].ok && w[2].ok && w[3].ok,
	       "threads queueing and synchronising one stream");
	report(peek(w[0].b) == 0x10 && peek(w[2].b) == 0x12,
	       "their copies all landed");
	for (i = 0; i < 4; i++) {
		cuMemFree(w[i].a);
		cuMemFree(w[i].b);
	}
	cuStreamDestroy(s);
}

/* Fresh processes: the double reads its environment once, at cuInit. */

static int child_no_device(void)
{
	CUdeviceptr d;
	int n;

	is(cuInit(0), CUDA_ERROR_NO_DEVICE, "CUDA_DOUBLE_NO_DEVICE=1: cuInit");
	is(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED, "later calls");
	is(cuMemAlloc(&d, 16), CUDA_ERROR_NOT_INITIALIZED, "cuMemAlloc");
	is(cuInit(0), CUDA_ERROR_NO_DEVICE, "cuInit again");
	return 0;
}

static int child_zero(void)
{
	is(cuInit(0), CUDA_ERROR_NO_DEVICE, "CUDA_DOUBLE_DEVICES=0: cuInit");
	return 0;
}

static int child_one(void)
{
	CUdevice dev;
	int n = 0;

	must(cuInit(0), "cuInit");
	cuDeviceGetCount(&n);
	report(n == 1, "one device by default");
	is(cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE, "no device 1");
	return 0;
}

static void setup_one(CUdeviceptr *d)
{
	CUcontext c;

	must(cuInit(0), "cuInit");
	must(cuDevicePrimaryCtxRetain(&c, 0), "retain");
	must(cuCtxSetCurrent(c), "set current");
	must(cuMemAlloc(d, LEN), "cuMemAlloc");
}

static int child_fail_copy(void)
{
	unsigned char h[LEN], back[LEN];
	CUdeviceptr d;

	setup_one(&d);
	memset(h, 0x11, LEN);
	is(cuMemcpyHtoD(d, h, LEN), CUDA_SUCCESS, "FAIL_COPY=3: copy 1");
	is(cuMemcpyDtoH(back, d, LEN), CUDA_SUCCESS, "copy 2");
	memset(h, 0x22, LEN);
	is(cuMemcpyHtoD(d, h, LEN), CUDA_ERROR_ILLEGAL_ADDRESS,
	   "copy 3 fails with ILLEGAL_ADDRESS");
	memset(back, 0, LEN);
	is(cuMemcpyDtoH(back, d, LEN), CUDA_SUCCESS, "copy 4");
	report(all(back, LEN, 0x11), "the failed copy moved no byte");
	return 0;
}

static int child_fail_copy_on(void)
{
	unsigned char h[LEN];
	CUdeviceptr d;

	setup_one(&d);
	memset(h, 0x11, LEN);
	is(cuMemcpyHtoD(d, h, LEN), CUDA_SUCCESS, "FAIL_COPY=2+: copy 1");
	is(cuMemcpyHtoD(d, h, LEN), CUDA_ERROR_ILLEGAL_ADDRESS, "copy 2 fails");
	is(cuMemcpyDtoH(h, d, LEN), CUDA_ERROR_ILLEGAL_ADDRESS, "copy 3 fails");
	is(cuMemcpyAsync(d, (CUdeviceptr)h, LEN, NULL),
	   CUDA_ERROR_ILLEGAL_ADDRESS, "copy 4 fails");
	return 0;
}

static int child_fail_sync(void)
{
	unsigned char h[LEN];
	CUdeviceptr a, b;
	CUstream s;

	setup_one(&a);
	must(cuMemAlloc(&b, LEN), "cuMemAlloc");
	must(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	memset(h, 0xaa, LEN);
	cuMemcpyHtoD(a, h, LEN);
	memset(h, 0xbb, LEN);
	cuMemcpyHtoD(b, h, LEN);
	is(cuCtxSynchronize(), CUDA_SUCCESS, "FAIL_SYNC=2: sync 1");
	cuMemcpyDtoDAsync(b, a, LEN, s);
	is(cuStreamSynchronize(s), CUDA_ERROR_LAUNCH_FAILED,
	   "sync 2 fails with LAUNCH_FAILED");
	cuMemcpyDtoH(h, b, LEN);
	report(all(h, LEN, 0xbb), "its pending copy was discarded");
	is(cuStreamSynchronize(s), CUDA_SUCCESS, "sync 3");
	return 0;
}

static int child_fail_query(void)
{
	CUdeviceptr a, b;
	CUstream s;
	CUevent e;

	setup_one(&a);
	must(cuMemAlloc(&b, LEN), "cuMemAlloc");
	must(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	must(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
	cuMemcpyDtoDAsync(b, a, LEN, s);
	must(cuEventRecord(e, s), "cuEventRecord");
	is(cuStreamQuery(s), CUDA_ERROR_NOT_READY, "FAIL_QUERY=2: query 1");
	is(cuEventQuery(e), CUDA_ERROR_LAUNCH_FAILED,
	   "query 2 fails with LAUNCH_FAILED");
	is(cuStreamSynchronize(s), CUDA_SUCCESS, "a sync after it");
	is(cuEventQuery(e), CUDA_SUCCESS, "query 3");
	return 0;
}

/*
 * CUDA IPC: the handle test_ipc() exported, in DOUBLE_TEST_IPC as hex,
 * opened in this other process: the same bytes, both ways.
 */
static int child_ipc(void)
{
	const char *hex = getenv("DOUBLE_TEST_IPC");
	unsigned char h[sizeof(CUipcMemHandle)], buf[LEN];
	CUipcMemHandle handle;
	CUdeviceptr d, d2;
	CUcontext ctx;
	size_t i;

	for (i = 0; hex && i < sizeof(h); i++)
		sscanf(hex + 2 * i, "%2hhx", &h[i]);
	memcpy(&handle, h, sizeof(handle));
	must(cuInit(0), "cuInit");
	must(cuDevicePrimaryCtxRetain(&ctx, 0), "cuDevicePrimaryCtxRetain");
	must(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	is(cuIpcOpenMemHandle(&d, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
	   CUDA_SUCCESS, "another process opens the handle");
	is(cuIpcOpenMemHandle(&d2, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
	   CUDA_SUCCESS, "and again");
	report(d2 == d, "at the same address");
	must(cuMemcpyDtoH(buf, d, LEN), "cuMemcpyDtoH");
	report(all(buf, LEN, 0x3c), "it reads the exporter's bytes");
	report(host_touch_faults((void *)d, false), "the host cannot touch them");
	memset(buf, 0x4d, LEN);
	must(cuMemcpyHtoD(d, buf, LEN), "cuMemcpyHtoD");
	must(cuCtxSynchronize(), "cuCtxSynchronize");
	is(cuIpcCloseMemHandle(d), CUDA_SUCCESS, "close");
	is(cuIpcCloseMemHandle(d), CUDA_SUCCESS, "close the second opening");
	is(cuIpcCloseMemHandle(d), CUDA_ERROR_INVALID_VALUE, "a third close");
	return failures ? 1 : 0;
}

static const struct child {
	const char *name;
	const char *env[2];
	int (*fn)(void);
} children[] = {
	{ "no-device", { "CUDA_DOUBLE_NO_DEVICE=1" }, child_no_device },
	{ "zero-devices", { "CUDA_DOUBLE_DEVICES=0" }, child_zero },
	{ "one-device", { NULL }, child_one },
	{ "fail-copy", { "CUDA_DOUBLE_FAIL_COPY=3" }, child_fail_copy },
	{ "fail-copy-on", { "CUDA_DOUBLE_FAIL_COPY=2+" }, child_fail_copy_on },
	{ "fail-sync", { "CUDA_DOUBLE_FAIL_SYNC=2" }, child_fail_sync },
	{ "fail-query", { "CUDA_DOUBLE_FAIL_QUERY=2" }, child_fail_query },
};

static const struct child ipc_child = { "ipc", { NULL }, child_ipc };

static void clean_env(void)
{
	unsetenv("CUDA_DOUBLE_DEVICES");
	unsetenv("CUDA_DOUBLE_NO_DEVICE");
	unsetenv("CUDA_DOUBLE_FAIL_COPY");
	unsetenv("CUDA_DOUBLE_FAIL_SYNC");
	unsetenv("CUDA_DOUBLE_FAIL_QUERY");
	unsetenv("CUDA_DOUBLE_MEM_MIB");
}

static void run_child(const struct child *c)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		clean_env();
		if (c->env[0])
			putenv((char *)c->env[0]);
		execl("/proc/self/exe", "double_test", "--child", c->name,
		      (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		status = -1;
	report(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "process with %s", c->env[0] ? c->env[0] : "default environment");
}

static void test_ipc(void)
{
	unsigned char h[sizeof(CUipcMemHandle)];
	char hex[2 * sizeof(h) + 1];
	CUipcMemHandle handle;
	CUdeviceptr d, o;
	size_t i;

	must(cuCtxSetCurrent(p0), "cuCtxSetCurrent");
	must(cuMemAlloc(&d, LEN), "cuMemAlloc");
	is(cuIpcGetMemHandle(&handle, d + 64), CUDA_ERROR_INVALID_VALUE,
	   "IPC: a handle only for the base of an allocation");
	must(cuIpcGetMemHandle(&handle, d), "cuIpcGetMemHandle");
	is(cuIpcOpenMemHandle(&o, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
	   CUDA_ERROR_INVALID_CONTEXT, "the exporter cannot open its own handle");
	fill(d, 0x3c, LEN);
	memcpy(h, &handle, sizeof(h));
	for (i = 0; i < sizeof(h); i++)
		sprintf(hex + 2 * i, "%02x", h[i]);
	setenv("DOUBLE_TEST_IPC", hex, 1);
	run_child(&ipc_child);
	unsetenv("DOUBLE_TEST_IPC");
	report(peek(d) == 0x4d, "the exporter sees what the other process wrote");
	must(cuMemFree(d), "cuMemFree");
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc == 3 && !strcmp(argv[1], "--child")) {
		for (i = 0; i < sizeof(children) / sizeof(children[0]); i++)
			if (!strcmp(argv[2], children[i].name))
				children[i].fn();
		if (!strcmp(argv[2], ipc_child.name))
			ipc_child.fn();
		return failures ? 1 : 0;
	}

	/* This tests the double; a GPU's own driver is not it. */
	if (getenv("HMEMLOOP_TEST_CUDA") &&
	    !strcmp(getenv("HMEMLOOP_TEST_CUDA"), "real")) {
		printf("SKIP: the CUDA driver here is the GPU's, not the double\n");
		return 77;
	}
	clean_env();
	setenv("CUDA_DOUBLE_DEVICES", "2", 1);
	test_before_init();
	test_devices();
	test_no_context();
	test_primary();
	test_stack();
	must(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	must(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	must(cuMemAllocHost((void **)&pin, LEN), "cuMemAllocHost");
	test_threads();
	test_protection();
	test_roundtrip();
	test_lateness();
	test_batch();
	test_kernel();
	test_legacy();
	test_events();
	test_sync_memops();
	test_attributes();
	test_vmm();
	test_two_devices();
	test_proc();
	test_errors();
	test_concurrency();
	test_ipc();
	test_reset();
	for (i = 0; i < sizeof(children) / sizeof(children[0]); i++)
		run_child(&children[i]);

	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
