/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CUDA driver double: memory.
 *
 * Device memory is a range of the memfd.  Its address is in dbl.view,
 * which is PROT_NONE: a host access faults and a syscall given it fails
 * with EFAULT, as with a GPU.  Managed memory is the same, made readable
 * and writable.  Pinned host memory is ordinary memory the double
 * remembers.  VMM reservations are PROT_NONE address space; cuMemMap maps
 * the handle's part of the memfd there, still PROT_NONE.
 */
#include "double.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Index of the last region starting at or below @addr, or -1. */
ssize_t region_index(uintptr_t addr)
{
	ssize_t lo = 0, hi = (ssize_t)dbl.nregs - 1, at = -1;

	while (lo <= hi) {
		ssize_t mid = (lo + hi) / 2;

		if (dbl.regs[mid]->va <= addr) {
			at = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return at;
}

struct region *region_find(uintptr_t addr)
{
	ssize_t i = region_index(addr);

	if (i < 0 || addr - dbl.regs[i]->va >= dbl.regs[i]->size)
		return NULL;
	return dbl.regs[i];
}

/* Does [addr, addr + len) meet a known region? */
bool region_overlaps(uintptr_t addr, size_t len)
{
	ssize_t i = region_index(addr + len - 1);

	return i >= 0 && dbl.regs[i]->va + dbl.regs[i]->size > addr;
}

struct region *region_new(enum region_kind kind, uintptr_t va, size_t size)
{
	struct region *r;
	ssize_t i;

	if (dbl.nregs == dbl.cap) {
		size_t cap = dbl.cap ? 2 * dbl.cap : 64;
		struct region **v = realloc(dbl.regs, cap * sizeof(*v));

		if (!v)
			return NULL;
		dbl.regs = v;
		dbl.cap = cap;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->kind = kind;
	r->va = va;
	r->size = size;
	r->span = size;
	r->id = ++dbl.ids;
	i = region_index(va) + 1;
	memmove(&dbl.regs[i + 1], &dbl.regs[i],
		(dbl.nregs - i) * sizeof(*dbl.regs));
	dbl.regs[i] = r;
	dbl.nregs++;
	return r;
}

void region_del(struct region *r)
{
	ssize_t i = region_index(r->va);

	memmove(&dbl.regs[i], &dbl.regs[i + 1],
		(dbl.nregs - i - 1) * sizeof(*dbl.regs));
	dbl.nregs--;
	free(r);
}

bool on_device(const struct region *r)
{
	return r->kind == R_DEVICE || r->kind == R_MANAGED || r->kind == R_VMM ||
	       r->kind == R_IPC;
}

/* Let queued work that uses @r finish first. */
void region_flush(struct region *r, bool sync_only)
{
	if (on_device(r) && !r->alias)
		flush_keys(KEY_DEV | r->phys, KEY_DEV | (r->phys + r->span),
			   sync_only);
	else
		flush_keys(r->va, r->va + r->size, sync_only);
}

bool in_gpu_space(uintptr_t a)
{
	uintptr_t view = (uintptr_t)dbl.view, vmm = (uintptr_t)dbl.vmm;

	return (a >= view && a - view < dbl.span * dbl.ndev) ||
	       (a >= vmm && a - vmm < dbl.vmm_size);
}

/* Release device pages: the next owner finds zeroes, not our data. */
void phys_put(int dev, uint64_t phys, uint64_t span)
{
	fallocate(dbl.memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		  phys, span);
	ext_free(&dbl.dev[dev].phys, phys);
	dbl.dev[dev].used -= span;
}

CUresult phys_get(int dev, uint64_t size, uint64_t align, uint64_t *phys)
{
	struct device *d = &dbl.dev[dev];

	if (size > d->total - d->used ||
	    ext_alloc(&d->phys, size, align, 0, phys))
		return CUDA_ERROR_OUT_OF_MEMORY;
	d->used += size;
	return CUDA_SUCCESS;
}

static CUresult dev_alloc(struct CUctx_st *c, size_t size,
			  enum region_kind kind, uintptr_t *va)
{
	uint64_t span, phys;
	struct region *r;
	CUresult ret;

	if (!size)
		return CUDA_ERROR_INVALID_VALUE;
	span = round_up(size, dbl.page);
	if (span < size)
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* like a GPU: big allocations start at a 2 MiB boundary */
	ret = phys_get(c->dev, span, span >= GRANULE ? GRANULE : dbl.page,
		      &phys);
	if (ret)
		return ret;
	r = region_new(kind, (uintptr_t)dbl.view + phys, size);
	if (!r) {
		phys_put(c->dev, phys, span);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	r->span = span;
	r->phys = phys;
	r->dev = c->dev;
	r->ctx = c;
	/* managed memory: the host may use it too */
	if (kind == R_MANAGED)
		mprotect((void *)r->va, span, PROT_READ | PROT_WRITE);
	*va = r->va;
	return CUDA_SUCCESS;
}

static void region_free(struct region *r)
{
	region_flush(r, false);
	switch (r->kind) {
	case R_MANAGED:
		mprotect((void *)r->va, r->span, PROT_NONE);
		/* fall through */
	case R_DEVICE:
		phys_put(r->dev, r->phys, r->span);
		break;
	case R_PINNED:
		munmap((void *)r->va, r->span);
		break;
	case R_IPC:
		ipc_unmap(r);
		break;
	default:
		break;
	}
	region_del(r);
}

/* A dying context takes its allocations with it. */
void mem_drop_ctx(struct CUctx_st *c)
{
	size_t i = dbl.nregs;

	while (i--)
		if (dbl.regs[i]->ctx == c)
			region_free(dbl.regs[i]);
}

static CUresult mem_alloc(CUdeviceptr *dptr, size_t size,
			  enum region_kind kind)
{
	struct CUctx_st *c;
	uintptr_t va;
	CUresult r = enter_ctx(!dptr, &c);

	if (r)
		return r;
	r = dev_alloc(c, size, kind, &va);
	if (!r)
		*dptr = va;
	unlock();
	return r;
}

ENTRY(cuMemAlloc_v2, (CUdeviceptr *dptr, size_t bytesize),
      mem_alloc(dptr, bytesize, R_DEVICE))

static CUresult mem_alloc_pitch(CUdeviceptr *dptr, size_t *pitch,
				size_t width, size_t height, unsigned elem)
{
	size_t p;
	CUresult r;

	if (!pitch || !width || !height ||
	    (elem != 4 && elem != 8 && elem != 16))
		return ready() ? CUDA_ERROR_INVALID_VALUE :
				 CUDA_ERROR_NOT_INITIALIZED;
	p = round_up(width, 512);
	if (height > SIZE_MAX / p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = mem_alloc(dptr, p * height, R_DEVICE);
	if (!r)
		*pitch = p;
	return r;
}

ENTRY(cuMemAllocPitch_v2,
      (CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
       unsigned int ElementSizeBytes),
      mem_alloc_pitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes))

static CUresult mem_alloc_managed(CUdeviceptr *dptr, size_t size,
				  unsigned flags)
{
	if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
		return ready() ? CUDA_ERROR_INVALID_VALUE :
				 CUDA_ERROR_NOT_INITIALIZED;
	return mem_alloc(dptr, size, R_MANAGED);
}

ENTRY(cuMemAllocManaged,
      (CUdeviceptr *dptr, size_t bytesize, unsigned int flags),
      mem_alloc_managed(dptr, bytesize, flags))

#define KIND(k) (1u << (k))

/*
 * Frees the region of one of these kinds that starts at p. The driver
 * answers a NULL p and one it does not know with codes of each call's own.
 * Freeing needs no context: the pointer says whose memory it is.
 */
static CUresult release(uintptr_t p, unsigned kinds, CUresult if_null,
			CUresult if_unknown)
{
	struct region *r;
	CUresult ret = CUDA_SUCCESS;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!p)
		return if_null;
	lock();
	r = region_find(p);
	if (!r || !(kinds & KIND(r->kind)) || r->va != p)
		ret = if_unknown;
	else
		region_free(r);
	unlock();
	return ret;
}

ENTRY(cuMemFree_v2, (CUdeviceptr dptr),
      release(dptr, KIND(R_DEVICE) | KIND(R_MANAGED), CUDA_SUCCESS,
	      CUDA_ERROR_INVALID_VALUE))

static CUresult mem_info(size_t *free_bytes, size_t *total)
{
	struct CUctx_st *c;
	CUresult r = enter_ctx(!free_bytes || !total, &c);

	if (r)
		return r;
	*total = dbl.dev[c->dev].total;
	*free_bytes = *total - dbl.dev[c->dev].used;
	unlock();
	return CUDA_SUCCESS;
}

ENTRY(cuMemGetInfo_v2, (size_t *free, size_t *total), mem_info(free, total))

static CUresult address_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	struct CUctx_st *c;
	struct region *r;
	CUresult ret = enter_ctx(false, &c);

	if (ret)
		return ret;
	r = region_find(p);
	if (!r) {
		ret = CUDA_ERROR_NOT_FOUND;
		goto out;
	}
	if (base)
		*base = r->va;
	if (size)
		*size = r->size;
out:
	unlock();
	return ret;
}

ENTRY(cuMemGetAddressRange_v2,
      (CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr),
      address_range(pbase, psize, dptr))

/* Pinned or registered host memory of context c, with its flags. */
static struct region *host_region(enum region_kind kind, uintptr_t va,
				  size_t size, unsigned flags,
				  struct CUctx_st *c)
{
	struct region *r = region_new(kind, va, size);

	if (r) {
		r->flags = flags;
		r->ctx = c;
		r->dev = c->dev;
	}
	return r;
}

static CUresult host_alloc(void **pp, size_t size, unsigned flags)
{
	const unsigned known = CU_MEMHOSTALLOC_PORTABLE |
			       CU_MEMHOSTALLOC_DEVICEMAP |
			       CU_MEMHOSTALLOC_WRITECOMBINED;
	struct CUctx_st *c;
	struct region *r;
	size_t span;
	void *p;
	CUresult ret = enter_ctx(!pp || !size || (flags & ~known), &c);

	if (ret)
		return ret;
	span = round_up(size, dbl.page);
	p = mmap(NULL, span, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		ret = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	r = host_region(R_PINNED, (uintptr_t)p, size, flags, c);
	if (!r) {
		munmap(p, span);
		ret = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	r->span = span;
	*pp = p;
out:
	unlock();
	return ret;
}

ENTRY(cuMemAllocHost_v2, (void **pp, size_t bytesize),
      host_alloc(pp, bytesize, 0))

ENTRY(cuMemHostAlloc, (void **pp, size_t bytesize, unsigned int Flags),
      host_alloc(pp, bytesize, Flags))

ENTRY(cuMemFreeHost, (void *p),
      release((uintptr_t)p, KIND(R_PINNED), CUDA_SUCCESS,
	      CUDA_ERROR_INVALID_VALUE))

/* Whole pages of [p, p + size) are mapped: msync() says ENOMEM if not. */
static bool host_mapped(void *p, size_t size)
{
	uintptr_t a = (uintptr_t)p & ~(dbl.page - 1);
	size_t len = round_up((uintptr_t)p + size - a, dbl.page);

	return msync((void *)a, len, MS_ASYNC) == 0;
}

static CUresult host_register(void *p, size_t size, unsigned flags)
{
	const unsigned known = CU_MEMHOSTREGISTER_PORTABLE |
			       CU_MEMHOSTREGISTER_DEVICEMAP |
			       CU_MEMHOSTREGISTER_IOMEMORY |
			       CU_MEMHOSTREGISTER_READ_ONLY;
	uintptr_t a = (uintptr_t)p;
	struct CUctx_st *c;
	CUresult ret;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!p || !size || a + size < a || (flags & ~known))
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & CU_MEMHOSTREGISTER_IOMEMORY)
		return CUDA_ERROR_NOT_SUPPORTED;
	lock();
	ret = ctx_current(&c);
	if (ret)
		goto out;
	if (in_gpu_space(a) || in_gpu_space(a + size - 1) ||
	    !host_mapped(p, size)) {
		ret = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if (region_overlaps(a, size)) {
		ret = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
		goto out;
	}
	if (!host_region(R_REGISTERED, a, size, flags, c))
		ret = CUDA_ERROR_OUT_OF_MEMORY;
out:
	unlock();
	return ret;
}

ENTRY_V2(cuMemHostRegister, (void *p, size_t bytesize, unsigned int Flags),
	 host_register(p, bytesize, Flags))

ENTRY(cuMemHostUnregister, (void *p),
      release((uintptr_t)p, KIND(R_REGISTERED), CUDA_ERROR_INVALID_VALUE,
	      CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED))

/*
 * As an H200 answers (driver 580): registered memory has flags too, so they
 * do not tell it from allocated memory, and both say they are mapped; with
 * no context current, an error.
 */
static CUresult host_flags(unsigned *flags, void *p)
{
	struct CUctx_st *c;
	struct region *r;
	CUresult ret = enter_ctx(!flags, &c);

	if (ret)
		return ret;
	r = region_find((uintptr_t)p);
	if (r && r->kind == R_PINNED)
		*flags = r->flags | CU_MEMHOSTALLOC_DEVICEMAP;
	else if (r && r->kind == R_REGISTERED)
		*flags = (r->flags & CU_MEMHOSTREGISTER_PORTABLE) |
			 CU_MEMHOSTALLOC_DEVICEMAP;
	else
		ret = CUDA_ERROR_INVALID_VALUE;
	unlock();
	return ret;
}

ENTRY(cuMemHostGetFlags, (unsigned int *pFlags, void *p), host_flags(pFlags, p))

/* With unified addressing the device sees pinned memory at its host address. */
static CUresult host_device_pointer(CUdeviceptr *dptr, void *p, unsigned flags)
{
	struct CUctx_st *c;
	struct region *r;
	CUresult ret = enter_ctx(!dptr || flags, &c);

	if (ret)
		return ret;
	r = region_find((uintptr_t)p);
	if (r && (r->kind == R_PINNED || r->kind == R_REGISTERED))
		*dptr = (uintptr_t)p;
	else
		ret = CUDA_ERROR_INVALID_VALUE;
	unlock();
	return ret;
}

ENTRY(cuMemHostGetDevicePointer_v2,
      (CUdeviceptr *pdptr, void *p, unsigned int Flags),
      host_device_pointer(pdptr, p, Flags))

/* Has some device been given @need access to mapping @r? */
static bool vmm_usable(const struct region *r, unsigned need)
{
	int d;

	for (d = 0; d < dbl.ndev; d++)
		if ((r->access[d] & need) == need)
			return true;
	return false;
}

/*
 * Do the VMM mappings from index @i on cover [addr, end), with access set?
 * Any device's access will do: copies need not model peer access.
 */
static CUresult vmm_covered(ssize_t i, uintptr_t addr, uintptr_t end,
			    bool write)
{
	unsigned need = write ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE :
				CU_MEM_ACCESS_FLAGS_PROT_READ;

	for (; addr < end; i++) {
		struct region *r;

		if ((size_t)i >= dbl.nregs)
			return CUDA_ERROR_INVALID_VALUE;
		r = dbl.regs[i];
		if (r->kind != R_VMM || r->va > addr || !vmm_usable(r, need))
			return CUDA_ERROR_INVALID_VALUE;
		addr = r->va + r->size;
	}
	return CUDA_SUCCESS;
}

/*
 * What [addr, addr + len) is, for a copy or memset.  Device ranges must lie
 * within their allocation; unknown memory is pageable host memory, unless
 * it is device address space.
 */
CUresult mem_range(uintptr_t addr, size_t len, bool write, enum mem *kind,
		   bool *sync_memops)
{
	struct region *r;

	if (!addr || addr + len < addr)
		return CUDA_ERROR_INVALID_VALUE;
	r = region_find(addr);
	if (!r) {
		if (in_gpu_space(addr) || in_gpu_space(addr + len - 1))
			return CUDA_ERROR_INVALID_VALUE;
		*kind = MEM_HOST;
		*sync_memops = false;
		return CUDA_SUCCESS;
	}
	*sync_memops = r->sync_memops;
	switch (r->kind) {
	case R_VMM:
		*kind = MEM_DEVICE;
		return vmm_covered(region_index(addr), addr, addr + len, write);
	case R_DEVICE:
	case R_IPC:
		*kind = MEM_DEVICE;
		break;
	case R_MANAGED:
		*kind = MEM_MANAGED;
		break;
	case R_REGISTERED:
		if (write && (r->flags & CU_MEMHOSTREGISTER_READ_ONLY))
			return CUDA_ERROR_INVALID_VALUE;
		/* fall through */
	default:
		*kind = MEM_PINNED;
		break;
	}
	return len <= r->va + r->size - addr ? CUDA_SUCCESS :
					       CUDA_ERROR_INVALID_VALUE;
}

/*
 * The first contiguous piece of [addr, addr + len), checked by mem_range:
 * where the double reads or writes it, and its key for flush_keys().
 */
size_t mem_piece(uintptr_t addr, size_t len, char **p, uint64_t *key)
{
	struct region *r = region_find(addr);
	size_t off;

	if (!r) {
		*p = (char *)addr;
		*key = addr;
		return len;
	}
	off = addr - r->va;
	if (len > r->size - off)
		len = r->size - off;
	if (r->alias) {
		/* another process's memory: its own mapping, keyed by
		 * address as no memfd offset of ours names it */
		*p = r->alias + off;
		*key = addr;
	} else if (on_device(r)) {
		*p = dbl.alias + r->phys + off;
		*key = KEY_DEV | (r->phys + off);
	} else {
		*p = (char *)addr;
		*key = addr;
	}
	return len;
}
