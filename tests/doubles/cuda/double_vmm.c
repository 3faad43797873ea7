/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CUDA driver double: virtual memory management (cuMemCreate and friends).
 *
 * A handle owns a range of the memfd on its device.  Reservations are
 * PROT_NONE address space in dbl.vmm.  cuMemMap maps the handle's pages
 * there with PROT_NONE, so VMM memory is as untouchable by the host as
 * cuMemAlloc memory; the double reaches it through dbl.alias.
 */
#include "double.h"

#include <stdlib.h>
#include <sys/mman.h>

static struct vmm_handle *handle_find(CUmemGenericAllocationHandle h)
{
	struct vmm_handle *v;

	for (v = dbl.handles; v; v = v->next)
		if ((uintptr_t)v == h && !v->released)
			return v;
	return NULL;
}

/* The memory goes once the handle is released and nothing maps it. */
static void handle_put(struct vmm_handle *v)
{
	struct vmm_handle **pp;

	if (!v->released || v->maps)
		return;
	flush_keys(KEY_DEV | v->phys, KEY_DEV | (v->phys + v->size), false);
	phys_put(v->dev, v->phys, v->size);
	for (pp = &dbl.handles; *pp != v; pp = &(*pp)->next)
		;
	*pp = v->next;
	free(v);
}

struct resv *resv_find(uintptr_t addr)
{
	struct resv *r;

	for (r = dbl.resvs; r; r = r->next)
		if (addr >= r->va && addr - r->va < r->size)
			return r;
	return NULL;
}

static CUresult prop_check(const CUmemAllocationProp *prop)
{
	const unsigned types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;

	if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!dev_ok(prop->location.id))
		return CUDA_ERROR_INVALID_DEVICE;
	if (prop->requestedHandleTypes & ~types)
		return CUDA_ERROR_NOT_SUPPORTED;
	return CUDA_SUCCESS;
}

static CUresult alloc_granularity(size_t *g, const CUmemAllocationProp *prop,
			    CUmemAllocationGranularity_flags option)
{
	CUresult r;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!g || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
		   option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		return CUDA_ERROR_INVALID_VALUE;
	r = prop_check(prop);
	if (!r)
		*g = GRANULE;
	return r;
}

ENTRY(cuMemGetAllocationGranularity,
      (size_t *granularity, const CUmemAllocationProp *prop,
       CUmemAllocationGranularity_flags option),
      alloc_granularity(granularity, prop, option))

/* No context needed: the location names the device. */
static CUresult mem_create(CUmemGenericAllocationHandle *handle, size_t size,
			   const CUmemAllocationProp *prop,
			   unsigned long long flags)
{
	struct vmm_handle *v;
	CUresult r;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!handle || flags || !size || size % GRANULE)
		return CUDA_ERROR_INVALID_VALUE;
	r = prop_check(prop);
	if (r)
		return r;
	v = calloc(1, sizeof(*v));
	if (!v)
		return CUDA_ERROR_OUT_OF_MEMORY;
	lock();
	r = phys_get(prop->location.id, size, GRANULE, &v->phys);
	if (!r) {
		v->magic = HANDLE_MAGIC;
		v->dev = prop->location.id;
		v->size = size;
		v->types = prop->requestedHandleTypes;
		v->id = ++dbl.ids;
		v->next = dbl.handles;
		dbl.handles = v;
		*handle = (uintptr_t)v;
	}
	unlock();
	if (r)
		free(v);
	return r;
}

ENTRY(cuMemCreate,
      (CUmemGenericAllocationHandle *handle, size_t size,
       const CUmemAllocationProp *prop, unsigned long long flags),
      mem_create(handle, size, prop, flags))

static CUresult mem_release(CUmemGenericAllocationHandle handle)
{
	struct vmm_handle *v;
	CUresult r = enter(false);

	if (r)
		return r;
	v = handle_find(handle);
	if (v) {
		v->released = true;
		handle_put(v);
	} else {
		r = CUDA_ERROR_INVALID_VALUE;
	}
	unlock();
	return r;
}

ENTRY(cuMemRelease, (CUmemGenericAllocationHandle handle), mem_release(handle))

static CUresult address_reserve(CUdeviceptr *ptr, size_t size, size_t align,
				CUdeviceptr addr, unsigned long long flags)
{
	struct resv *rv;
	uint64_t va;
	CUresult r = CUDA_SUCCESS;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!align)
		align = GRANULE;
	if (!ptr || flags || !size || size % dbl.page || addr % dbl.page ||
	    (align & (align - 1)))
		return CUDA_ERROR_INVALID_VALUE;
	if (align < dbl.page)
		align = dbl.page;
	rv = calloc(1, sizeof(*rv));
	if (!rv)
		return CUDA_ERROR_OUT_OF_MEMORY;
	lock();
	if (ext_alloc(&dbl.vmm_va, size, align, addr, &va)) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		rv->va = va;
		rv->size = size;
		rv->next = dbl.resvs;
		dbl.resvs = rv;
		*ptr = va;
	}
	unlock();
	if (r)
		free(rv);
	return r;
}

ENTRY(cuMemAddressReserve,
      (CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
       unsigned long long flags),
      address_reserve(ptr, size, alignment, addr, flags))

/* Mappings must be gone first: a shim that frees mapped space is buggy. */
static CUresult address_free(CUdeviceptr ptr, size_t size)
{
	struct resv **pp, *rv;
	CUresult r = enter(false);

	if (r)
		return r;
	for (pp = &dbl.resvs; *pp; pp = &(*pp)->next)
		if ((*pp)->va == ptr && (*pp)->size == size)
			break;
	rv = *pp;
	if (!rv || region_overlaps(ptr, size)) {
		r = CUDA_ERROR_INVALID_VALUE;
	} else {
		*pp = rv->next;
		ext_free(&dbl.vmm_va, rv->va);
		free(rv);
	}
	unlock();
	return r;
}

ENTRY(cuMemAddressFree, (CUdeviceptr ptr, size_t size), address_free(ptr, size))

static CUresult mem_map(CUdeviceptr ptr, size_t size, size_t offset,
			CUmemGenericAllocationHandle handle,
			unsigned long long flags)
{
	struct vmm_handle *v;
	struct region *reg;
	struct resv *rv;
	void *p;
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (flags || !size || ptr % GRANULE || size % GRANULE ||
	    offset % GRANULE)
		return CUDA_ERROR_INVALID_VALUE;
	lock();
	v = handle_find(handle);
	rv = resv_find(ptr);
	if (!v || offset > v->size || size > v->size - offset || !rv ||
	    size > rv->va + rv->size - ptr || region_overlaps(ptr, size))
		goto out;
	reg = region_new(R_VMM, ptr, size);
	if (!reg) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	p = mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED,
		 dbl.memfd, v->phys + offset);
	if (p == MAP_FAILED) {
		region_del(reg);
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	reg->phys = v->phys + offset;
	reg->dev = v->dev;
	reg->h = v;
	reg->resv = rv;
	v->maps++;
	r = CUDA_SUCCESS;
out:
	unlock();
	return r;
}

ENTRY(cuMemMap,
      (CUdeviceptr ptr, size_t size, size_t offset,
       CUmemGenericAllocationHandle handle, unsigned long long flags),
      mem_map(ptr, size, offset, handle, flags))

/*
 * The index of the first of the whole mappings that make up exactly
 * [ptr, ptr + size), or -1.
 */
static ssize_t mappings(uintptr_t ptr, size_t size)
{
	ssize_t first = region_index(ptr), i;
	uintptr_t at = ptr, end = ptr + size;

	if (first < 0 || dbl.regs[first]->va != ptr || end < ptr)
		return -1;
	for (i = first; at < end; i++) {
		if ((size_t)i >= dbl.nregs || dbl.regs[i]->kind != R_VMM ||
		    dbl.regs[i]->va != at)
			return -1;
		at += dbl.regs[i]->size;
	}
	return at == end ? first : -1;
}

/* Unmapping waits for work on the range, then leaves a reservation. */
static CUresult mem_unmap(CUdeviceptr ptr, size_t size)
{
	struct region *reg;
	ssize_t i;
	CUresult r = enter(false);

	if (r)
		return r;
	i = mappings(ptr, size);
	if (i < 0) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	while ((size_t)i < dbl.nregs && dbl.regs[i]->va < ptr + size) {
		reg = dbl.regs[i];
		region_flush(reg, false);
		mmap((void *)reg->va, reg->size, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
		     -1, 0);
		reg->h->maps--;
		handle_put(reg->h);
		region_del(reg);
	}
out:
	unlock();
	return r;
}

ENTRY(cuMemUnmap, (CUdeviceptr ptr, size_t size), mem_unmap(ptr, size))

static CUresult access_check(const CUmemAccessDesc *d)
{
	if (d->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	if (!dev_ok(d->location.id))
		return CUDA_ERROR_INVALID_DEVICE;
	if (d->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
	    d->flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
	    d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* Access is what devices may do; the host never gets any. */
static CUresult set_access(CUdeviceptr ptr, size_t size,
			   const CUmemAccessDesc *desc, size_t count)
{
	ssize_t i, first;
	size_t k;
	CUresult r = CUDA_SUCCESS;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!desc || !count)
		return CUDA_ERROR_INVALID_VALUE;
	for (k = 0; k < count && !r; k++)
		r = access_check(&desc[k]);
	if (r)
		return r;
	lock();
	first = mappings(ptr, size);
	if (first < 0) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	for (i = first; (size_t)i < dbl.nregs && dbl.regs[i]->va < ptr + size;
	     i++)
		for (k = 0; k < count; k++)
			dbl.regs[i]->access[desc[k].location.id] =
				desc[k].flags;
out:
	unlock();
	return r;
}

ENTRY(cuMemSetAccess,
      (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count),
      set_access(ptr, size, desc, count))

static CUresult get_access(unsigned long long *flags, const CUmemLocation *loc,
			   CUdeviceptr ptr)
{
	struct region *r;
	CUresult ret = CUDA_SUCCESS;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!flags || !loc || loc->type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	if (!dev_ok(loc->id))
		return CUDA_ERROR_INVALID_DEVICE;
	lock();
	r = region_find(ptr);
	if (r && r->kind == R_VMM)
		*flags = r->access[loc->id];
	else
		ret = CUDA_ERROR_INVALID_VALUE;
	unlock();
	return ret;
}

ENTRY(cuMemGetAccess,
      (unsigned long long *flags, const CUmemLocation *location,
       CUdeviceptr ptr),
      get_access(flags, location, ptr))
