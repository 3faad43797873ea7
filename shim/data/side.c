/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The sides of an operation (hml_op.h): the buffers of this process it
 * reads or writes, found in the memory regions that hold them (mrmap.c:
 * by key for an RMA target, by descriptor for a local buffer), each
 * classified as host or device memory, and the bytes moved from one side
 * to the other: with memcpy between host buffers, with the CUDA driver
 * (copy.c) where a device buffer is involved.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "hml_log.h"
#include "hml_op.h"

/* A region's memory type is asked once. Whoever wins the race from
 * UNKNOWN to BUSY asks and records it; anyone meanwhile asks for
 * itself. Pinned host memory is asked each time: the application may
 * unpin it (cuMemHostUnregister) and go on using the region, and the copy
 * kernel must not reach it then. */
#define MEM_BUSY 3

static int classify_mr(struct hml_mr *mr, const void *ptr, struct hml_mem *m)
{
	int type = HML_MEM_UNKNOWN;
	int ret;

	/* With FI_HMEM the registration's iface is the application's word. */
	if ((mr->domain->caps & FI_HMEM) && mr->iface == FI_HMEM_SYSTEM) {
		*m = (struct hml_mem) { .type = HML_MEM_HOST };
		return 0;
	}
	if (mr->iov_count != 1)
		return hml_cuda_classify(ptr, m);
	type = __atomic_load_n(&mr->memtype, __ATOMIC_ACQUIRE);
	if (type == HML_MEM_DEVICE ||
	    (type == HML_MEM_HOST && !mr->mem.start)) {
		*m = mr->mem;
		return 0;
	}
	if (type != HML_MEM_UNKNOWN ||
	    !__atomic_compare_exchange_n(&mr->memtype, &type, MEM_BUSY, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return hml_cuda_classify(ptr, m);
	ret = hml_cuda_classify(mr->iov[0].iov_base, &mr->mem);
	*m = mr->mem;
	__atomic_store_n(&mr->memtype, ret ? HML_MEM_UNKNOWN : m->type,
			 __ATOMIC_RELEASE);
	return ret;
}

static int add(struct hml_side *s, void *ptr, size_t len, struct hml_mr *mr)
{
	struct hml_mem *m = &s->mem[s->count];
	int ret;

	if (s->count == HML_IOV_MAX)
		return -FI_E2BIG;
	/* Lengths that wrap past 2^64 would pass for a short transfer. */
	if (len > SIZE_MAX - s->len) {
		hml_warn_once("the buffer lengths of an operation add up past "
			      "2^64: -FI_EINVAL");
		return -FI_EINVAL;
	}
	ret = mr ? classify_mr(mr, ptr, m) : hml_cuda_classify(ptr, m);
	if (ret)
		return ret;
	s->iov[s->count++] = (struct iovec) { ptr, len };
	s->len += len;
	s->device |= m->type == HML_MEM_DEVICE;
	return 0;
}

/* The initiator's own buffers: their descriptors name their regions. */
int hml_side_local(struct hml_side *s, struct hml_domain *d,
		   const struct iovec *iov, void **desc, size_t count)
{
	int ret;

	s->count = s->len = 0;
	s->device = false;
	for (size_t i = 0; i < count; i++) {
		struct hml_mr *mr = desc && desc[i] ?
				    hml_mrmap_desc(&d->mrs, desc[i]) : NULL;

		ret = iov[i].iov_len ?
		      add(s, iov[i].iov_base, iov[i].iov_len, mr) : 0;
		hml_mr_put(mr);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * A target range of a region: with FI_MR_VIRT_ADDR the address is a
 * virtual address inside one of the region's buffers; otherwise an offset
 * into the region's buffers laid end to end. Out of bounds is -FI_EACCES.
 */
static int add_range(struct hml_side *s, struct hml_mr *mr, uint64_t addr,
		     size_t len, bool virt)
{
	for (size_t i = 0; i < mr->iov_count && len; i++) {
		uintptr_t base = (uintptr_t) mr->iov[i].iov_base;
		size_t n, size = mr->iov[i].iov_len;
		int ret;

		if (virt) {
			if (addr < base || addr - base > size ||
			    len > size - (addr - base))
				continue;
			return add(s, (void *) (uintptr_t) addr, len, mr);
		}
		if (addr >= size) {
			addr -= size;
			continue;
		}
		n = size - addr < len ? size - addr : len;
		ret = add(s, (char *) base + addr, n, mr);
		if (ret)
			return ret;
		len -= n;
		addr = 0;
	}
	return len ? -FI_EACCES : 0;
}

void hml_side_put(struct hml_mr **mrs, size_t count)
{
	for (size_t i = 0; i < count; i++)
		hml_mr_put(mrs[i]);
}

/* The target's buffers, by key, in the target's domain (or endpoint). On
 * success mrs holds their regions, which the caller puts. */
int hml_side_target(struct hml_side *s, struct hml_ep *t,
		       const struct fi_rma_iov *riov, size_t count,
		       uint64_t access, struct hml_mr **mrs)
{
	bool virt = t->domain->mr_mode & FI_MR_VIRT_ADDR;
	int ret = 0;
	size_t i;

	s->count = s->len = 0;
	s->device = false;
	for (i = 0; i < count && !ret; i++) {
		struct hml_mr *mr = hml_mrmap_key(&t->domain->mrs, riov[i].key,
						  t->base);
		struct hml_mem m;

		mrs[i] = mr;
		if (!mr) {
			ret = -FI_EINVAL;
			break;
		}
		/* Whether the region is device memory decides whose error a
		 * refused range is: known before the range is judged. */
		if (!classify_mr(mr, mr->iov[0].iov_base, &m) &&
		    m.type == HML_MEM_DEVICE)
			s->device = true;
		if ((mr->access & access) != access)
			ret = -FI_EACCES;
		else if (riov[i].len)
			ret = add_range(s, mr, riov[i].addr, riov[i].len, virt);
	}
	if (ret)
		hml_side_put(mrs, i);
	return ret;
}

const struct hml_mem *hml_side_device(const struct hml_side *s)
{
	for (size_t i = 0; i < s->count; i++)
		if (s->mem[i].type == HML_MEM_DEVICE)
			return &s->mem[i];
	return NULL;
}

/* ---- moving the bytes ---- */

/* The device whose context does the copy: the destination's if it is on
 * one, else the source's. */
static const struct hml_mem *copy_device(const struct hml_side *dst,
					 const struct hml_side *src)
{
	const struct hml_mem *m = hml_side_device(dst);

	return m ? m : hml_side_device(src);
}

/*
 * Copy len bytes from src's buffers to dst's, both taken end to end. With
 * op, the device's pieces are posted for op's initiator, after its other
 * copies, and waited for only if op's completion is not deferred (op's
 * ticket); host bytes are copied at once, after the copies the initiator
 * has in flight, which they may read or overwrite.
 */
int hml_move(const struct hml_side *dst, const struct hml_side *src,
	     size_t len, struct hml_op *op)
{
	const struct hml_mem *dev = copy_device(dst, src);
	struct hml_copy copy;
	size_t di = 0, si = 0, doff = 0, soff = 0;
	bool waited = !op;
	int err;

	/* An ordered copy goes to the driver after those queued before it,
	 * never in a batch with them, which the driver runs in any order. */
	if (dev && hml_copy_begin(&copy, dev, op && hml_op_deferred(op) &&
				  !op->ordered))
		return hml_copy_end(&copy);
	if (dev && op)
		hml_inflight_order(op->e, &copy);
	while (len) {
		size_t n = len;
		char *d = (char *) dst->iov[di].iov_base + doff;
		char *s = (char *) src->iov[si].iov_base + soff;

		if (n > dst->iov[di].iov_len - doff)
			n = dst->iov[di].iov_len - doff;
		if (n > src->iov[si].iov_len - soff)
			n = src->iov[si].iov_len - soff;
		if (dst->mem[di].type == HML_MEM_HOST &&
		    src->mem[si].type == HML_MEM_HOST) {
			if (!waited)
				hml_inflight_wait(op->e);
			waited = true;
			memcpy(d, s, n);
		} else
			hml_copy_piece(&copy, d, &dst->mem[di], s,
				       &src->mem[si], n);
		len -= n;
		doff += n;
		soff += n;
		if (doff == dst->iov[di].iov_len) {
			di++;
			doff = 0;
		}
		if (soff == src->iov[si].iov_len) {
			si++;
			soff = 0;
		}
	}
	if (!dev)
		return 0;
	if (!op)
		return hml_copy_end(&copy);
	err = hml_copy_post(&copy, &op->ticket);
	return err || hml_op_deferred(op) ? err : hml_ticket_land(&op->ticket);
}

