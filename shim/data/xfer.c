/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Same-process transfers (hml_xfer.h): each side is a list of buffers of
 * this process, classified as host or device memory; the rules say whose
 * the operation is; the bytes go with memcpy between host buffers and with
 * the CUDA driver where a device buffer is involved.
 */
#include <stdint.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "hml_config.h"
#include "hml_log.h"
#include "hml_op.h"
#include "hml_stats.h"

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

static void put_regions(struct hml_mr **mrs, size_t count)
{
	for (size_t i = 0; i < count; i++)
		hml_mr_put(mrs[i]);
}

/* The target's buffers, by key, in the target's domain (or endpoint). On
 * success mrs holds their regions, which the caller puts. */
static int side_target(struct hml_side *s, struct hml_ep *t,
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
		put_regions(mrs, i);
	return ret;
}

const struct hml_mem *hml_side_device(const struct hml_side *s)
{
	for (size_t i = 0; i < s->count; i++)
		if (s->mem[i].type == HML_MEM_DEVICE)
			return &s->mem[i];
	return NULL;
}

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

	if (dev && hml_copy_begin(&copy, dev, op && hml_op_deferred(op)))
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

/*
 * The rules, for RMA and messages alike; known: the target's side is
 * built too (RMA). Lengths past 2^64 are refused before anything moves.
 * An operation of more buffers than the shim takes, or whose target the
 * shim cannot classify, is the provider's to judge; so is host memory on
 * both sides, which the provider moves correctly, unless HMEMLOOP_SELF=all.
 * An inject over the endpoint's inject_size the provider refuses by its
 * size alone when it is host memory; one of device memory it must not
 * see, and the shim refuses it (-FI_EINVAL).
 */
static enum hml_verdict judge(struct hml_xfer *x, int err, int terr,
			      bool known)
{
	x->err = err ? err : terr;
	if (err == -FI_EINVAL)
		return HML_REFUSE;
	if (err == -FI_E2BIG || terr == -FI_E2BIG)
		return hml_stat_pass(HML_STAT_UNSUPPORTED);
	if (known && !x->all && !x->mine.device && !x->theirs.device)
		return hml_stat_pass(HML_STAT_HOST);
	if (err || !(x->inject || (x->flags & FI_INJECT)) ||
	    x->mine.len <= x->e->inject_size)
		return HML_DO;
	if (!x->mine.device)
		return hml_stat_pass(HML_STAT_HOST);
	hml_warn_once("an inject of %zu bytes of device memory is over the "
		      "endpoint's inject_size (%zu): -FI_EINVAL", x->mine.len,
		      x->e->inject_size);
	x->err = -FI_EINVAL;
	return HML_REFUSE;
}

static void start(struct hml_xfer *x, struct hml_ep *e, struct hml_ep *t,
		  uint64_t flags, bool inject)
{
	x->e = e;
	x->t = t;
	x->flags = flags;
	x->inject = inject;
	x->all = hml_config.self == HML_SELF_ALL;
	x->err = 0;
	x->nmrs = 0;
}

/*
 * An RMA operation of e to t. Only the initiator's FI_OPT_CUDA_API_PERMITTED
 * counts: the copy is made in the initiator's call (a message's is made in
 * the receiver's calls too, hml_xfer_msg_ok).
 */
enum hml_verdict hml_xfer_rma(struct hml_xfer *x, struct hml_ep *e,
			      struct hml_ep *t, const struct fi_msg_rma *msg,
			      uint64_t flags, uint64_t access, bool inject)
{
	int err, terr;

	start(x, e, t, flags, inject);
	if (e->base->cuda_forbidden)
		return hml_stat_pass(HML_STAT_FORBIDDEN);
	if (msg->rma_iov_count > HML_IOV_MAX)
		return hml_stat_pass(HML_STAT_UNSUPPORTED);
	err = hml_side_local(&x->mine, e->domain, msg->msg_iov, msg->desc,
			     msg->iov_count);
	terr = side_target(&x->theirs, t, msg->rma_iov, msg->rma_iov_count,
			   access, x->mrs);
	/* A failed side_target holds no region. */
	x->nmrs = terr ? 0 : msg->rma_iov_count;
	return judge(x, err, terr, true);
}

/* Messages of e to t may be the shim's: the receiver's calls may deliver
 * them, so neither side may be an endpoint that forbade CUDA calls. */
bool hml_xfer_msg_ok(const struct hml_ep *e, const struct hml_ep *t)
{
	return !e->base->cuda_forbidden && !t->base->cuda_forbidden;
}

/* A message of e to t, which hml_xfer_msg_ok allowed (the caller asks
 * first: a pass of this function's tells the receive queue, one for a
 * forbidding endpoint must not), whose receive is not known yet: whether
 * host memory passes is asked again of the receive (hml_xfer_host). */
enum hml_verdict hml_xfer_send(struct hml_xfer *x, struct hml_ep *e,
			       struct hml_ep *t, const struct iovec *iov,
			       void **desc, size_t count, uint64_t flags,
			       bool inject)
{
	start(x, e, t, flags, inject);
	return judge(x, hml_side_local(&x->mine, e->domain, iov, desc, count),
		     0, false);
}

/* Host memory on both sides, which the provider moves correctly: the
 * initiator's, and the receive's buffers in d. A receive that cannot be
 * classified counts as device memory, which is always safe. */
bool hml_xfer_host(const struct hml_xfer *x, struct hml_domain *d,
		   const struct iovec *iov, void **desc, size_t count)
{
	struct hml_side dst;

	return !x->all && !x->mine.device &&
	       !hml_side_local(&dst, d, iov, desc, count) && !dst.device;
}

/* RMA: the bytes, from the target's side to the initiator's for a read,
 * the other way for a write, posted for op (hml_move); a negative FI_E*
 * code. */
int hml_xfer_copy(struct hml_xfer *x, bool read, struct hml_op *op)
{
	if (x->mine.len != x->theirs.len)
		return -FI_EINVAL;
	return read ? hml_move(&x->mine, &x->theirs, x->mine.len, op) :
		      hml_move(&x->theirs, &x->mine, x->mine.len, op);
}

void hml_xfer_end(struct hml_xfer *x)
{
	put_regions(x->mrs, x->nmrs);
	x->nmrs = 0;
}
