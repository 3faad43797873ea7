/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CUDA driver double: initialisation, fault injection, devices, tracing
 * and the extent allocator behind device memory and VMM address space.
 */
#include "double.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct dbl dbl = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.memfd = -1,
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int state;		/* 0: before cuInit, 1: ready, -1: failed */
static CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;

bool ready(void)
{
	return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == 1;
}

void lock(void)
{
	pthread_mutex_lock(&dbl.lock);
}

void unlock(void)
{
	pthread_mutex_unlock(&dbl.lock);
}

uint64_t round_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

bool dev_ok(CUdevice dev)
{
	return dev >= 0 && dev < dbl.ndev;
}

CUresult arg_check(bool invalid)
{
	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	return invalid ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult dev_check(bool invalid, CUdevice dev)
{
	CUresult r = arg_check(invalid);

	if (!r && !dev_ok(dev))
		r = CUDA_ERROR_INVALID_DEVICE;
	return r;
}

CUresult enter(bool invalid)
{
	CUresult r = arg_check(invalid);

	if (!r)
		lock();
	return r;
}

/* One line per call; a single write() keeps threads' lines apart. */
CUresult traced(const char *fn, CUresult r)
{
	char line[160];
	ssize_t n;
	int len;

	if (!__atomic_load_n(&dbl.trace, __ATOMIC_RELAXED))
		return r;
	len = snprintf(line, sizeof(line), "cuda-double: %s -> %s\n", fn,
		       error_name(r));
	if (len > (int)sizeof(line) - 1)
		len = sizeof(line) - 1;
	if (len > 0) {
		n = write(STDERR_FILENO, line, len);
		(void)n;
	}
	return r;
}

/* A count from the environment: "N", or "N+" where @plus is wanted. */
static uint64_t env_count(const char *name, uint64_t def, bool *plus)
{
	const char *s = getenv(name);
	unsigned long long v;
	char *end;

	if (plus)
		*plus = false;
	if (!s || !*s)
		return def;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (plus && end != s && *end == '+') {
		*plus = true;
		end++;
	}
	if (errno || end == s || *end || *s == '-') {
		fprintf(stderr, "cuda-double: ignoring %s=%s\n", name, s);
		if (plus)
			*plus = false;
		return def;
	}
	return v;
}

/* The driver API version told and honoured: CUDA_DOUBLE_VERSION plays an
 * older driver (12080 lacks cuMemcpyBatchAsync's 13.0 form). */
int driver_version(void)
{
	return env_count("CUDA_DOUBLE_VERSION", DRIVER_VERSION, NULL);
}

/* The Nth event of a kind fails, or the Nth and every later one with "N+". */
static bool nth(uint64_t *count, uint64_t n, bool on)
{
	uint64_t k;

	k = __atomic_add_fetch(count, 1, __ATOMIC_RELAXED);
	return n && (k == n || (on && k > n));
}

bool copy_fails(void)
{
	return nth(&dbl.copies, dbl.fail_copy, dbl.fail_copy_on);
}

bool sync_fails(void)
{
	return nth(&dbl.syncs, dbl.fail_sync, dbl.fail_sync_on);
}

/* cuStreamQuery and cuEventQuery: a fault the device reports late. */
bool query_fails(void)
{
	return nth(&dbl.queries, dbl.fail_query, dbl.fail_query_on);
}

/* Map at a 2 MiB boundary, as a GPU aligns its address space. */
static void *map_aligned(size_t bytes, int prot, int flags, int fd)
{
	size_t slack = bytes + GRANULE;
	char *p, *a;

	p = mmap(NULL, slack, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return p;
	a = (char *)round_up((uintptr_t)p, GRANULE);
	if (mmap(a, bytes, prot, flags | MAP_FIXED, fd, 0) == MAP_FAILED) {
		munmap(p, slack);
		return MAP_FAILED;
	}
	if (a > p)
		munmap(p, a - p);
	if (p + slack > a + bytes)
		munmap(a + bytes, p + slack - (a + bytes));
	return a;
}

/*
 * The device memory of all devices is one sparse memfd, mapped twice:
 * PROT_NONE where the application sees it, read-write for the double.
 * Pages cost nothing until written, and a hole is punched on free.
 */
static CUresult mem_setup(uint64_t total)
{
	uint64_t bytes;
	int d;

	dbl.page = sysconf(_SC_PAGESIZE);
	dbl.span = round_up(total, GRANULE);
	bytes = dbl.span * dbl.ndev;
	dbl.memfd = memfd_create("cuda-double", MFD_CLOEXEC);
	if (dbl.memfd < 0 || ftruncate(dbl.memfd, bytes))
		goto fail;
	dbl.view = map_aligned(bytes, PROT_NONE, MAP_SHARED | MAP_NORESERVE,
			       dbl.memfd);
	dbl.alias = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_NORESERVE, dbl.memfd, 0);
	/* room to reserve twice the memory of every device */
	dbl.vmm_size = 2 * bytes;
	dbl.vmm = map_aligned(dbl.vmm_size, PROT_NONE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1);
	if (dbl.view == MAP_FAILED || dbl.alias == MAP_FAILED ||
	    dbl.vmm == MAP_FAILED)
		goto fail;
	for (d = 0; d < dbl.ndev; d++) {
		dbl.dev[d].total = total;
		ext_init(&dbl.dev[d].phys, d * dbl.span, total);
	}
	ext_init(&dbl.vmm_va, (uintptr_t)dbl.vmm, dbl.vmm_size);
	return CUDA_SUCCESS;
fail:
	fprintf(stderr, "cuda-double: cannot set up device memory: %s\n",
		strerror(errno));
	return CUDA_ERROR_OUT_OF_MEMORY;
}

static void init(void)
{
	uint64_t ndev, mib;
	int d;

	__atomic_store_n(&dbl.trace, env_count("CUDA_DOUBLE_TRACE", 0, NULL) != 0,
			 __ATOMIC_RELAXED);
	dbl.fail_copy = env_count("CUDA_DOUBLE_FAIL_COPY", 0, &dbl.fail_copy_on);
	dbl.fail_sync = env_count("CUDA_DOUBLE_FAIL_SYNC", 0, &dbl.fail_sync_on);
	dbl.fail_query = env_count("CUDA_DOUBLE_FAIL_QUERY", 0,
				   &dbl.fail_query_on);
	ndev = env_count("CUDA_DOUBLE_DEVICES", 1, NULL);
	mib = env_count("CUDA_DOUBLE_MEM_MIB", DEFAULT_MEM >> 20, NULL);
	if (ndev > MAX_DEVICES) {
		fprintf(stderr, "cuda-double: at most %d devices\n", MAX_DEVICES);
		ndev = MAX_DEVICES;
	}
	if (mib < 1024)
		mib = 1024;
	dbl.ndev = ndev;

	if (env_count("CUDA_DOUBLE_NO_DEVICE", 0, NULL) || !ndev) {
		init_result = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	init_result = mem_setup(mib << 20);
	for (d = 0; !init_result && d < dbl.ndev; d++)
		init_result = ctx_init_primary(d);
out:
	__atomic_store_n(&state, init_result ? -1 : 1, __ATOMIC_RELEASE);
}

/* The child of a fork() of a process that initialised the driver cannot
 * use it: every call there answers CUDA_ERROR_NOT_INITIALIZED, cuInit
 * too (an H200, driver 580). */
static void forked(void)
{
	if (ready()) {
		init_result = CUDA_ERROR_NOT_INITIALIZED;
		__atomic_store_n(&state, -1, __ATOMIC_RELEASE);
	}
}

__attribute__((constructor)) static void fork_init(void)
{
	pthread_atfork(NULL, NULL, forked);
}

API CUresult cuInit(unsigned int flags)
{
	if (flags)
		return traced(__func__, CUDA_ERROR_INVALID_VALUE);
	pthread_once(&once, init);
	return traced(__func__, init_result);
}

API CUresult cuDriverGetVersion(int *version)
{
	if (!version)
		return traced(__func__, CUDA_ERROR_INVALID_VALUE);
	*version = driver_version();
	return traced(__func__, CUDA_SUCCESS);
}

static CUresult device_get(CUdevice *dev, int ordinal)
{
	CUresult r = dev_check(!dev, ordinal);

	if (r)
		return r;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

ENTRY(cuDeviceGet, (CUdevice *device, int ordinal), device_get(device, ordinal))

static CUresult device_count(int *count)
{
	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = dbl.ndev;
	return CUDA_SUCCESS;
}

ENTRY(cuDeviceGetCount, (int *count), device_count(count))

static CUresult device_name(char *name, int len, CUdevice dev)
{
	CUresult r = dev_check(!name || len <= 0, dev);

	if (r)
		return r;
	snprintf(name, len, "CUDA driver double");
	return CUDA_SUCCESS;
}

ENTRY(cuDeviceGetName, (char *name, int len, CUdevice dev),
      device_name(name, len, dev))

/* An H100/H200-like device; whatever is not listed reads as 0. */
static int attribute(CUdevice_attribute attrib, CUdevice dev)
{
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
	case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
	case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
	case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
	case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
		return 1;
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
		return dev;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		return 9;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
		return 0;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
		return 132;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
		return 32;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
		return 1024;
	case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
		return 2;
	case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
		return 1;
	default:
		return 0;
	}
}

static CUresult device_attribute(int *pi, CUdevice_attribute attrib,
				 CUdevice dev)
{
	CUresult r = dev_check(!pi || attrib <= 0 ||
				attrib >= CU_DEVICE_ATTRIBUTE_MAX, dev);

	if (r)
		return r;
	*pi = attribute(attrib, dev);
	return CUDA_SUCCESS;
}

ENTRY(cuDeviceGetAttribute, (int *pi, CUdevice_attribute attrib, CUdevice dev),
      device_attribute(pi, attrib, dev))

static CUresult device_total(size_t *bytes, CUdevice dev)
{
	CUresult r = dev_check(!bytes, dev);

	if (r)
		return r;
	*bytes = dbl.dev[dev].total;
	return CUDA_SUCCESS;
}

ENTRY(cuDeviceTotalMem_v2, (size_t *bytes, CUdevice dev),
      device_total(bytes, dev))

static CUresult can_access_peer(int *can, CUdevice dev, CUdevice peer)
{
	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!can)
		return CUDA_ERROR_INVALID_VALUE;
	if (!dev_ok(dev) || !dev_ok(peer))
		return CUDA_ERROR_INVALID_DEVICE;
	*can = dev != peer;
	return CUDA_SUCCESS;
}

ENTRY(cuDeviceCanAccessPeer,
      (int *canAccessPeer, CUdevice dev, CUdevice peerDev),
      can_access_peer(canAccessPeer, dev, peerDev))

static CUresult device_pci_bus_id(char *id, int len, CUdevice dev)
{
	CUresult r = dev_check(!id || len <= 0, dev);

	if (r)
		return r;
	/* the bus number is the ordinal, as CU_DEVICE_ATTRIBUTE_PCI_BUS_ID */
	snprintf(id, len, "0000:%02x:00.0", dev);
	return CUDA_SUCCESS;
}

ENTRY(cuDeviceGetPCIBusId, (char *pciBusId, int len, CUdevice dev),
      device_pci_bus_id(pciBusId, len, dev))

static CUresult device_uuid(CUuuid *uuid, CUdevice dev)
{
	static const char stem[] = "cuda-double-";
	CUresult r = dev_check(!uuid, dev);

	if (r)
		return r;
	memset(uuid, 0, sizeof(*uuid));
	memcpy(uuid->bytes, stem, sizeof(stem) - 1);
	uuid->bytes[15] = (char)dev;
	return CUDA_SUCCESS;
}

ENTRY_V2(cuDeviceGetUuid, (CUuuid *uuid, CUdevice dev), device_uuid(uuid, dev))

void ext_init(struct extents *e, uint64_t base, uint64_t size)
{
	memset(e, 0, sizeof(*e));
	e->base = base;
	e->size = size;
}

static int ext_insert(struct extents *e, size_t i, uint64_t off, uint64_t len,
		      uint64_t *out)
{
	if (e->n == e->cap) {
		size_t cap = e->cap ? 2 * e->cap : 16;
		struct extent *v = realloc(e->v, cap * sizeof(*v));

		if (!v)
			return -1;
		e->v = v;
		e->cap = cap;
	}
	memmove(&e->v[i + 1], &e->v[i], (e->n - i) * sizeof(*e->v));
	e->v[i].off = off;
	e->v[i].len = len;
	e->n++;
	*out = off;
	return 0;
}

/* Is [off, off + len) free?  Where would it go? */
static bool ext_fits(struct extents *e, uint64_t off, uint64_t len, size_t *at)
{
	size_t i;

	if (off < e->base || len > e->size || off - e->base > e->size - len)
		return false;
	for (i = 0; i < e->n && e->v[i].off < off; i++)
		;
	if (i > 0 && e->v[i - 1].off + e->v[i - 1].len > off)
		return false;
	if (i < e->n && off + len > e->v[i].off)
		return false;
	*at = i;
	return true;
}

/* First fit of @len bytes aligned to @align; at @hint if that is free. */
int ext_alloc(struct extents *e, uint64_t len, uint64_t align, uint64_t hint,
	      uint64_t *out)
{
	uint64_t at = e->base;
	size_t i;

	if (!len)
		return -1;
	if (hint && hint % align == 0 && ext_fits(e, hint, len, &i))
		return ext_insert(e, i, hint, len, out);
	for (i = 0; i <= e->n; i++) {
		uint64_t end = i < e->n ? e->v[i].off : e->base + e->size;
		uint64_t start = round_up(at, align);

		if (start <= end && end - start >= len)
			return ext_insert(e, i, start, len, out);
		if (i < e->n)
			at = e->v[i].off + e->v[i].len;
	}
	return -1;
}

void ext_free(struct extents *e, uint64_t off)
{
	size_t i;

	for (i = 0; i < e->n; i++) {
		if (e->v[i].off == off) {
			memmove(&e->v[i], &e->v[i + 1],
				(e->n - i - 1) * sizeof(*e->v));
			e->n--;
			return;
		}
	}
}
