/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * RMA: a read or write whose target is an endpoint of this process and
 * which touches device memory is done here, with the CUDA driver, and
 * completed as the provider would complete it. Everything else goes to the
 * provider unchanged.
 */
#include <string.h>

#include <rdma/fi_errno.h>

#include "hml_log.h"
#include "hml_op.h"
#include "hml_stats.h"

enum kind { READ, WRITE, INJECT };

static struct hml_ep *rma_ep(struct fid_ep *ep)
{
	return hml_container_of(ep->rma, struct hml_ep, rma.ops);
}

static void bad_input(int err, const struct fi_msg_rma *msg, int kind)
{
	const char *what = kind == READ ? "read" : "write";

	if (err == FI_EINVAL && msg->iov_count)
		hml_warn_once("an RMA %s names no region of its target "
			      "(key %#lx) or its lengths differ: error "
			      "completion FI_EINVAL", what,
			      (unsigned long) msg->rma_iov[0].key);
	else if (err == FI_EACCES)
		hml_warn_once("an RMA %s runs outside its target region or "
			      "lacks FI_REMOTE_%s: error completion FI_EACCES",
			      what, kind == READ ? "READ" : "WRITE");
	hml_debug("RMA %s to context %p failed: %s", what, msg->context,
		  fi_strerror(err));
}

/* The target's CQ, where the operation reports remote CQ data. */
static struct hml_cq *data_cq(struct hml_ep *t, uint64_t flags, int kind)
{
	return kind != READ && (flags & FI_REMOTE_CQ_DATA) ? t->base->rx_cq :
							     NULL;
}

/* HML_PASS when the provider should do it; otherwise *ret is the call's
 * return, with the operation posted, to complete successfully or not. */
static enum hml_verdict local_rma(struct hml_ep *e, struct hml_ep *t,
				  const struct fi_msg_rma *msg, uint64_t flags,
				  int kind, ssize_t *ret)
{
	struct hml_xfer x;
	struct hml_op op = {
		.e = e,
		.flags = flags,
		.inject = kind == INJECT,
		.cntr = kind == READ ? HML_CNTR_READ : HML_CNTR_WRITE,
		.tx = {
			.op_context = msg->context,
			.flags = FI_RMA | (kind == READ ? FI_READ : FI_WRITE),
			.src_addr = FI_ADDR_NOTAVAIL,
		},
		.t = t,
		.target = true,
		.read = kind == READ,
		.data = msg->data,
	};
	struct hml_cqe *c = &op.tx;
	enum hml_verdict v;

	v = hml_xfer_rma(&x, e, t, msg, flags,
			 kind == READ ? FI_REMOTE_READ : FI_REMOTE_WRITE,
			 kind == INJECT);
	*ret = v == HML_REFUSE ? hml_stat_ret(x.err) : 0;
	/* The provider's operations to this process follow the shim's. */
	if (v == HML_PASS)
		hml_inflight_wait(e);
	if (v != HML_DO)
		goto out;
	/* A place for each entry it may report, or nothing moves. */
	if (!hml_cq_reserve(e->base->tx_cq)) {
		*ret = -FI_EAGAIN;
		goto out;
	}
	if (!hml_cq_reserve(data_cq(t, flags, kind))) {
		hml_cq_unreserve(e->base->tx_cq);
		*ret = -FI_EAGAIN;
		goto out;
	}

	c->err = -x.err;
	if (!c->err)
		c->err = -hml_xfer_copy(&x, op.read, &op);
	if (c->err) {
		bad_input(c->err, msg, kind);
		hml_cq_unreserve(data_cq(t, flags, kind));
		op.target = false;
	} else {
		c->len = x.mine.len;
		hml_stat_done(kind == READ ? HML_STAT_READ : HML_STAT_WRITE,
			      kind == READ ? &x.theirs : &x.mine,
			      kind == READ ? &x.mine : &x.theirs, c->len);
	}
	/* The regions stay held until the operation completes. */
	op.nmrs = x.nmrs;
	memcpy(op.mrs, x.mrs, x.nmrs * sizeof(x.mrs[0]));
	x.nmrs = 0;
	hml_inflight_add(&op);
out:
	hml_xfer_end(&x);
	return v;
}

/* Each call: resolve the destination (a few loads when it is another
 * process), and only for this process put the call in fi_msg_rma form. */
#define LOCAL_RMA(ep, iov, desc, count, dest, addr, key, ctx, data, flags, \
		  kind, ret) ({						\
	struct hml_ep *e_ = rma_ep(ep), *t_ = hml_target(e_, dest);	\
	enum hml_verdict r_ = HML_PASS;					\
	if (t_) {							\
		struct fi_rma_iov riov_ = { addr, 0, key };		\
		struct fi_msg_rma msg_ = { iov, desc, count, dest, &riov_, 1, \
					   ctx, data };			\
		for (size_t i_ = 0; i_ < (count); i_++)			\
			riov_.len += (iov)[i_].iov_len;			\
		r_ = local_rma(e_, t_, &msg_, flags, kind, ret);	\
	} else								\
		hml_stat_pass(HML_STAT_REMOTE);				\
	r_; })

static ssize_t hml_read(struct fid_ep *ep, void *buf, size_t len, void *desc,
			fi_addr_t src, uint64_t addr, uint64_t key, void *ctx)
{
	ssize_t ret;

	if (LOCAL_RMA(ep, HML_IOV(buf, len), &desc, 1, src, addr, key, ctx, 0,
		      rma_ep(ep)->tx_op_flags, READ, &ret) != HML_PASS)
		return ret;
	return rma_ep(ep)->prov_rma->read(ep, buf, len, desc, src, addr, key,
					  ctx);
}

static ssize_t hml_readv(struct fid_ep *ep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t src,
			 uint64_t addr, uint64_t key, void *ctx)
{
	ssize_t ret;

	if (LOCAL_RMA(ep, iov, desc, count, src, addr, key, ctx, 0,
		      rma_ep(ep)->tx_op_flags, READ, &ret) != HML_PASS)
		return ret;
	return rma_ep(ep)->prov_rma->readv(ep, iov, desc, count, src, addr,
					   key, ctx);
}

static ssize_t hml_write(struct fid_ep *ep, const void *buf, size_t len,
			 void *desc, fi_addr_t dest, uint64_t addr,
			 uint64_t key, void *ctx)
{
	ssize_t ret;

	if (LOCAL_RMA(ep, HML_IOV(buf, len), &desc, 1, dest, addr, key, ctx, 0,
		      rma_ep(ep)->tx_op_flags, WRITE, &ret) != HML_PASS)
		return ret;
	return rma_ep(ep)->prov_rma->write(ep, buf, len, desc, dest, addr, key,
					   ctx);
}

static ssize_t hml_writev(struct fid_ep *ep, const struct iovec *iov,
			  void **desc, size_t count, fi_addr_t dest,
			  uint64_t addr, uint64_t key, void *ctx)
{
	ssize_t ret;

	if (LOCAL_RMA(ep, iov, desc, count, dest, addr, key, ctx, 0,
		      rma_ep(ep)->tx_op_flags, WRITE, &ret) != HML_PASS)
		return ret;
	return rma_ep(ep)->prov_rma->writev(ep, iov, desc, count, dest, addr,
					    key, ctx);
}

static ssize_t hml_writedata(struct fid_ep *ep, const void *buf, size_t len,
			     void *desc, uint64_t data, fi_addr_t dest,
			     uint64_t addr, uint64_t key, void *ctx)
{
	ssize_t ret;

	if (LOCAL_RMA(ep, HML_IOV(buf, len), &desc, 1, dest, addr, key, ctx,
		      data, rma_ep(ep)->tx_op_flags | FI_REMOTE_CQ_DATA, WRITE,
		      &ret) != HML_PASS)
		return ret;
	return rma_ep(ep)->prov_rma->writedata(ep, buf, len, desc, data, dest,
					       addr, key, ctx);
}

static ssize_t hml_inject_write(struct fid_ep *ep, const void *buf, size_t len,
				fi_addr_t dest, uint64_t addr, uint64_t key)
{
	ssize_t ret;

	if (LOCAL_RMA(ep, HML_IOV(buf, len), NULL, 1, dest, addr, key, NULL, 0,
		      rma_ep(ep)->tx_op_flags, INJECT, &ret) != HML_PASS)
		return ret;
	return rma_ep(ep)->prov_rma->inject(ep, buf, len, dest, addr, key);
}

static ssize_t hml_inject_writedata(struct fid_ep *ep, const void *buf,
				    size_t len, uint64_t data, fi_addr_t dest,
				    uint64_t addr, uint64_t key)
{
	ssize_t ret;

	if (LOCAL_RMA(ep, HML_IOV(buf, len), NULL, 1, dest, addr, key, NULL,
		      data, rma_ep(ep)->tx_op_flags | FI_REMOTE_CQ_DATA, INJECT,
		      &ret) != HML_PASS)
		return ret;
	return rma_ep(ep)->prov_rma->injectdata(ep, buf, len, data, dest, addr,
						key);
}

static enum hml_verdict msg_op(struct fid_ep *ep, const struct fi_msg_rma *msg,
			       uint64_t flags, int kind, ssize_t *ret)
{
	struct hml_ep *e = rma_ep(ep), *t = hml_target(e, msg->addr);

	return t ? local_rma(e, t, msg, flags, kind, ret) :
		   hml_stat_pass(HML_STAT_REMOTE);
}

static ssize_t hml_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg,
			   uint64_t flags)
{
	ssize_t ret;

	if (msg_op(ep, msg, flags, READ, &ret) != HML_PASS)
		return ret;
	return rma_ep(ep)->prov_rma->readmsg(ep, msg, flags);
}

static ssize_t hml_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg,
			    uint64_t flags)
{
	ssize_t ret;

	if (msg_op(ep, msg, flags, WRITE, &ret) != HML_PASS)
		return ret;
	return rma_ep(ep)->prov_rma->writemsg(ep, msg, flags);
}

void hml_rma_ops(struct fi_ops_rma *ops)
{
	hml_table_set(ops, read, hml_read);
	hml_table_set(ops, readv, hml_readv);
	hml_table_set(ops, readmsg, hml_readmsg);
	hml_table_set(ops, write, hml_write);
	hml_table_set(ops, writev, hml_writev);
	hml_table_set(ops, writemsg, hml_writemsg);
	hml_table_set(ops, inject, hml_inject_write);
	hml_table_set(ops, writedata, hml_writedata);
	hml_table_set(ops, injectdata, hml_inject_writedata);
}
