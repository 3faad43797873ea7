/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CUDA driver double: CUDA IPC (cuIpcGetMemHandle and friends).
 *
 * A handle names a cuMemAlloc allocation by its process, that process's
 * memfd and the allocation's place in it.  Another process opens the memfd
 * through /proc and maps the same pages twice, as the double maps its own:
 * PROT_NONE in its device address space (the VMM area), read-write for the
 * double.  Both processes then see the same bytes, as on a GPU.
 */
#include "double.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define IPC_MAGIC	0x49706321u

/* What a CUipcMemHandle carries (64 bytes, opaque to applications). */
struct ipc_handle {
	uint32_t magic;
	int32_t pid;
	int32_t fd;		/* the exporter's memfd */
	int32_t dev;
	uint64_t phys, span, size;
	uint64_t id;		/* the allocation's buffer id */
};

_Static_assert(sizeof(struct ipc_handle) <= sizeof(CUipcMemHandle),
	       "an IPC handle fits its 64 bytes");

struct ipc_map {
	pid_t pid;
	uint64_t id;
	unsigned refs;
	uint64_t resv;		/* its share of the VMM area */
};

/* The base of an allocation of this process: a handle another process can
 * open. */
static CUresult get_handle(CUipcMemHandle *out, CUdeviceptr dptr)
{
	struct ipc_handle h = { 0 };
	struct region *r;
	CUresult ret = enter(!out);

	if (ret)
		return ret;
	r = region_find(dptr);
	if (!r || r->kind != R_DEVICE || r->va != dptr) {
		ret = CUDA_ERROR_INVALID_VALUE;
	} else {
		h = (struct ipc_handle) {
			.magic = IPC_MAGIC, .pid = getpid(), .fd = dbl.memfd,
			.dev = r->dev, .phys = r->phys, .span = r->span,
			.size = r->size, .id = r->id,
		};
		memset(out, 0, sizeof(*out));
		memcpy(out, &h, sizeof(h));
	}
	unlock();
	return ret;
}

ENTRY(cuIpcGetMemHandle, (CUipcMemHandle *pHandle, CUdeviceptr dptr),
      get_handle(pHandle, dptr))

static struct region *opened(const struct ipc_handle *h, struct CUctx_st *c)
{
	for (size_t i = 0; i < dbl.nregs; i++) {
		struct region *r = dbl.regs[i];

		if (r->kind == R_IPC && r->ctx == c && r->ipc->pid == h->pid &&
		    r->ipc->id == h->id)
			return r;
	}
	return NULL;
}

/* Map the exporter's pages at a place of the VMM area: 0 or an error. */
static CUresult map(const struct ipc_handle *h, struct CUctx_st *c,
		    struct region **out)
{
	char path[64];
	uint64_t va, len = round_up(h->span, GRANULE);
	struct ipc_map *m;
	struct region *r;
	char *alias;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", h->pid, h->fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_MAP_FAILED;
	m = calloc(1, sizeof(*m));
	if (!m || ext_alloc(&dbl.vmm_va, len, GRANULE, 0, &va)) {
		free(m);
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	alias = mmap(NULL, h->span, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		     h->phys);
	if (alias == MAP_FAILED ||
	    mmap((void *)va, h->span, PROT_NONE, MAP_SHARED | MAP_FIXED, fd,
		 h->phys) == MAP_FAILED ||
	    !(r = region_new(R_IPC, va, h->size))) {
		if (alias != MAP_FAILED)
			munmap(alias, h->span);
		ext_free(&dbl.vmm_va, va);
		free(m);
		close(fd);
		return CUDA_ERROR_MAP_FAILED;
	}
	close(fd);
	*m = (struct ipc_map) { .pid = h->pid, .id = h->id, .refs = 1,
				.resv = va };
	r->span = h->span;
	r->dev = h->dev;
	r->ctx = c;
	r->ipc = m;
	r->alias = alias;
	*out = r;
	return CUDA_SUCCESS;
}

/* The exporting process cannot open its own handle ("invalid device
 * context"); a context that opened it already gets the same address. */
static CUresult open_handle(CUdeviceptr *pdptr, CUipcMemHandle handle,
			    unsigned flags)
{
	struct ipc_handle h;
	struct CUctx_st *c;
	struct region *r;
	CUresult ret;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pdptr || (flags & ~CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&h, &handle, sizeof(h));
	if (h.magic != IPC_MAGIC || !dev_ok(h.dev))
		return CUDA_ERROR_INVALID_HANDLE;
	if (h.pid == getpid())
		return CUDA_ERROR_INVALID_CONTEXT;
	lock();
	ret = ctx_current(&c);
	if (ret)
		goto out;
	r = opened(&h, c);
	if (r)
		r->ipc->refs++;
	else
		ret = map(&h, c, &r);
	if (!ret)
		*pdptr = r->va;
out:
	unlock();
	return ret;
}

ENTRY_V2(cuIpcOpenMemHandle,
	 (CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags),
	 open_handle(pdptr, handle, Flags))

/* Undo map(); the caller deletes the region. */
void ipc_unmap(struct region *r)
{
	munmap(r->alias, r->span);
	/* Back to reserved, untouchable address space. */
	mmap((void *)r->va, r->span, PROT_NONE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
	ext_free(&dbl.vmm_va, r->ipc->resv);
	free(r->ipc);
}

static CUresult close_handle(CUdeviceptr dptr)
{
	struct region *r;
	CUresult ret = enter(false);

	if (ret)
		return ret;
	r = region_find(dptr);
	if (!r || r->kind != R_IPC || r->va != dptr)
		ret = CUDA_ERROR_INVALID_VALUE;
	else if (!--r->ipc->refs) {
		region_flush(r, false);
		ipc_unmap(r);
		region_del(r);
	}
	unlock();
	return ret;
}

ENTRY(cuIpcCloseMemHandle, (CUdeviceptr dptr), close_handle(dptr))
