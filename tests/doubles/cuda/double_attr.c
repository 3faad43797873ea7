/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CUDA driver double: pointer attributes.
 *
 * cuPointerGetAttribute refuses memory CUDA does not know with
 * CUDA_ERROR_INVALID_VALUE; cuPointerGetAttributes answers with "NULL"
 * defaults instead.  Boolean and enum attributes are written as unsigned
 * int, identifiers as unsigned long long, addresses as pointers.
 */
#include "double.h"

#include <string.h>

enum width {
	W_NONE,
	W_UINT,
	W_INT,
	W_U64,
	W_PTR,
	W_SIZE,
};

static enum width attr_width(CUpointer_attribute a)
{
	switch (a) {
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
	case CU_POINTER_ATTRIBUTE_MAPPED:
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
	case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
		return W_UINT;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		return W_INT;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		return W_U64;
	case CU_POINTER_ATTRIBUTE_CONTEXT:
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		return W_PTR;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		return W_SIZE;
	default:
		return W_NONE;
	}
}

static const size_t width_size[] = {
	[W_NONE] = 0,
	[W_UINT] = sizeof(unsigned),
	[W_INT] = sizeof(int),
	[W_U64] = sizeof(uint64_t),
	[W_PTR] = sizeof(uintptr_t),
	[W_SIZE] = sizeof(size_t),
};

/* v in the attribute's width: its low bytes, on a little-endian host as
 * every CUDA host is. */
static void put(void *data, enum width w, uint64_t v)
{
	_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
		       "put() writes the low bytes of v");
	memcpy(data, &v, width_size[w]);
}

/* Access of the current context's device to VMM memory. */
static unsigned vmm_access(const struct region *r)
{
	struct CUctx_st *c = ctx_top();

	return r->access[c && !c->dead ? c->dev : r->dev];
}

/*
 * The value of @a for @ptr, in region @r (NULL if CUDA does not know it)
 * and reservation @rv.  @strict: cuPointerGetAttribute's errors.
 */
static CUresult attr_get(struct region *r, struct resv *rv, uintptr_t ptr,
			 CUpointer_attribute a, bool strict, uint64_t *v)
{
	bool host_ok, dev_mem;

	*v = 0;
	if (a == CU_POINTER_ATTRIBUTE_P2P_TOKENS)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (attr_width(a) == W_NONE)
		return CUDA_ERROR_INVALID_VALUE;
	if (a == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
		*v = (uint64_t)-2;	/* no device */
	if (a == CU_POINTER_ATTRIBUTE_DEVICE_POINTER && strict && !ctx_top())
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!r && rv) {
		/* reserved but not mapped: only the range is known */
		if (a == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
			*v = rv->va;
		else if (a == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
			*v = rv->size;
		else if (a != CU_POINTER_ATTRIBUTE_MAPPED && strict)
			return CUDA_ERROR_INVALID_VALUE;
		return CUDA_SUCCESS;
	}
	if (!r)
		return strict ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;

	dev_mem = on_device(r);
	host_ok = !dev_mem || r->kind == R_MANAGED;
	switch (a) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*v = (uintptr_t)r->ctx;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*v = dev_mem ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*v = ptr;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (!host_ok)
			return strict ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
		*v = ptr;
		break;
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		*v = r->sync_memops;
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*v = r->id;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*v = r->kind == R_MANAGED;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*v = r->dev;
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		*v = r->kind == R_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*v = r->resv ? r->resv->va : r->va;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*v = r->resv ? r->resv->size : r->size;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*v = 1;
		break;
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
		*v = r->h ? r->h->types : 0;
		break;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		if (r->kind == R_VMM)
			*v = vmm_access(r);
		else if (r->kind == R_REGISTERED &&
			 (r->flags & CU_MEMHOSTREGISTER_READ_ONLY))
			*v = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ;
		else
			*v = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		*v = r->va;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		*v = r->size;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		*v = r->h ? r->h->id : r->id;
		break;
	default:
		/* no RDMA, no pools, no decompression: 0 */
		break;
	}
	return CUDA_SUCCESS;
}

static void lookup(uintptr_t ptr, struct region **r, struct resv **rv)
{
	*r = region_find(ptr);
	*rv = *r ? (*r)->resv : resv_find(ptr);
}

static CUresult get_attribute(void *data, CUpointer_attribute a,
			      CUdeviceptr ptr)
{
	struct region *r;
	struct resv *rv;
	uint64_t v;
	CUresult ret = enter(!data);

	if (ret)
		return ret;
	lookup(ptr, &r, &rv);
	ret = attr_get(r, rv, ptr, a, true, &v);
	if (!ret)
		put(data, attr_width(a), v);
	unlock();
	return ret;
}

ENTRY(cuPointerGetAttribute,
      (void *data, CUpointer_attribute attribute, CUdeviceptr ptr),
      get_attribute(data, attribute, ptr))

static CUresult get_attributes(unsigned n, CUpointer_attribute *attrs,
			       void **data, CUdeviceptr ptr)
{
	struct region *r;
	struct resv *rv;
	uint64_t v;
	CUresult ret = CUDA_SUCCESS;
	unsigned i;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!n || !attrs || !data)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < n; i++)
		if (!data[i] || attr_width(attrs[i]) == W_NONE)
			return CUDA_ERROR_INVALID_VALUE;
	lock();
	lookup(ptr, &r, &rv);
	for (i = 0; i < n && !ret; i++) {
		ret = attr_get(r, rv, ptr, attrs[i], false, &v);
		if (!ret)
			put(data[i], attr_width(attrs[i]), v);
	}
	unlock();
	return ret;
}

ENTRY(cuPointerGetAttributes,
      (unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
       CUdeviceptr ptr),
      get_attributes(numAttributes, attributes, data, ptr))

/*
 * Only SYNC_MEMOPS can be set, and not on VMM memory.  Setting it makes
 * pending "synchronous" work on the buffer complete first.
 */
static CUresult set_attribute(const void *value, CUpointer_attribute a,
			      CUdeviceptr ptr)
{
	struct region *r;
	unsigned on;
	CUresult ret = CUDA_SUCCESS;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!value || a != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&on, value, sizeof(on));
	lock();
	r = region_find(ptr);
	if (!r) {
		ret = CUDA_ERROR_INVALID_VALUE;
	} else if (r->kind == R_VMM) {
		ret = CUDA_ERROR_NOT_SUPPORTED;
	} else {
		r->sync_memops = on != 0;
		if (on)
			region_flush(r, true);
	}
	unlock();
	return ret;
}

ENTRY(cuPointerSetAttribute,
      (const void *value, CUpointer_attribute attribute, CUdeviceptr ptr),
      set_attribute(value, attribute, ptr))
