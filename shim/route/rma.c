/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The RMA calls: a read or write whose target is an endpoint of this
 * process goes to the router (route.c); any other to the provider
 * unchanged.
 */
#include "hml_msg.h"
#include "hml_route.h"
#include "hml_stats.h"

static struct hml_ep *rma_ep(struct fid_ep *ep)
{
	return hml_container_of(ep->rma, struct hml_ep, rma.ops);
}

/* Each call: resolve the destination (a few loads when it is another
 * process), and only for this process put the call in fi_msg_rma form. */
#define LOCAL_RMA(ep, iov, desc, count, dest, addr, key, ctx, data, flags, \
		  kind, inject, ret) ({					\
	struct hml_ep *e_ = rma_ep(ep), *t_ = hml_target(e_, dest);	\
	bool p_ = true;							\
	if (t_) {							\
		struct fi_rma_iov riov_ = { addr, 0, key };		\
		struct fi_msg_rma msg_ = { iov, desc, count, dest, &riov_, 1, \
					   ctx, data };			\
		for (size_t i_ = 0; i_ < (count); i_++)			\
			riov_.len += (iov)[i_].iov_len;			\
		p_ = hml_run_rma(e_, t_, &msg_, flags, kind, inject, ret); \
	} else {							\
		hml_stat_pass(HML_WHY_REMOTE);				\
		hml_hold_flush(e_->domain);				\
	}								\
	p_; })

static ssize_t hml_read(struct fid_ep *ep, void *buf, size_t len, void *desc,
			fi_addr_t src, uint64_t addr, uint64_t key, void *ctx)
{
	ssize_t ret;

	if (!LOCAL_RMA(ep, HML_IOV(buf, len), &desc, 1, src, addr, key, ctx, 0,
		      rma_ep(ep)->tx_op_flags, HML_READ, false, &ret))
		return ret;
	return rma_ep(ep)->prov_rma->read(ep, buf, len, desc, src, addr, key,
					  ctx);
}

static ssize_t hml_readv(struct fid_ep *ep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t src,
			 uint64_t addr, uint64_t key, void *ctx)
{
	ssize_t ret;

	if (!LOCAL_RMA(ep, iov, desc, count, src, addr, key, ctx, 0,
		      rma_ep(ep)->tx_op_flags, HML_READ, false, &ret))
		return ret;
	return rma_ep(ep)->prov_rma->readv(ep, iov, desc, count, src, addr,
					   key, ctx);
}

static ssize_t hml_write(struct fid_ep *ep, const void *buf, size_t len,
			 void *desc, fi_addr_t dest, uint64_t addr,
			 uint64_t key, void *ctx)
{
	ssize_t ret;

	if (!LOCAL_RMA(ep, HML_IOV(buf, len), &desc, 1, dest, addr, key, ctx, 0,
		      rma_ep(ep)->tx_op_flags, HML_WRITE, false, &ret))
		return ret;
	return rma_ep(ep)->prov_rma->write(ep, buf, len, desc, dest, addr, key,
					   ctx);
}

static ssize_t hml_writev(struct fid_ep *ep, const struct iovec *iov,
			  void **desc, size_t count, fi_addr_t dest,
			  uint64_t addr, uint64_t key, void *ctx)
{
	ssize_t ret;

	if (!LOCAL_RMA(ep, iov, desc, count, dest, addr, key, ctx, 0,
		      rma_ep(ep)->tx_op_flags, HML_WRITE, false, &ret))
		return ret;
	return rma_ep(ep)->prov_rma->writev(ep, iov, desc, count, dest, addr,
					    key, ctx);
}

static ssize_t hml_writedata(struct fid_ep *ep, const void *buf, size_t len,
			     void *desc, uint64_t data, fi_addr_t dest,
			     uint64_t addr, uint64_t key, void *ctx)
{
	ssize_t ret;

	if (!LOCAL_RMA(ep, HML_IOV(buf, len), &desc, 1, dest, addr, key, ctx,
		      data, rma_ep(ep)->tx_op_flags | FI_REMOTE_CQ_DATA,
		      HML_WRITE, false, &ret))
		return ret;
	return rma_ep(ep)->prov_rma->writedata(ep, buf, len, desc, data, dest,
					       addr, key, ctx);
}

static ssize_t hml_inject_write(struct fid_ep *ep, const void *buf, size_t len,
				fi_addr_t dest, uint64_t addr, uint64_t key)
{
	ssize_t ret;

	if (!LOCAL_RMA(ep, HML_IOV(buf, len), NULL, 1, dest, addr, key, NULL, 0,
		      rma_ep(ep)->tx_op_flags, HML_WRITE, true, &ret))
		return ret;
	return rma_ep(ep)->prov_rma->inject(ep, buf, len, dest, addr, key);
}

static ssize_t hml_inject_writedata(struct fid_ep *ep, const void *buf,
				    size_t len, uint64_t data, fi_addr_t dest,
				    uint64_t addr, uint64_t key)
{
	ssize_t ret;

	if (!LOCAL_RMA(ep, HML_IOV(buf, len), NULL, 1, dest, addr, key, NULL,
		      data, rma_ep(ep)->tx_op_flags | FI_REMOTE_CQ_DATA,
		      HML_WRITE, true, &ret))
		return ret;
	return rma_ep(ep)->prov_rma->injectdata(ep, buf, len, data, dest, addr,
						key);
}

static bool msg_op(struct fid_ep *ep, const struct fi_msg_rma *msg,
		   uint64_t flags, int kind, ssize_t *ret)
{
	struct hml_ep *e = rma_ep(ep), *t = hml_target(e, msg->addr);

	if (t)
		return hml_run_rma(e, t, msg, flags, kind, false, ret);
	hml_stat_pass(HML_WHY_REMOTE);
	hml_hold_flush(e->domain);
	return true;
}

static ssize_t hml_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg,
			   uint64_t flags)
{
	ssize_t ret;

	if (!msg_op(ep, msg, flags, HML_READ, &ret))
		return ret;
	return rma_ep(ep)->prov_rma->readmsg(ep, msg, flags);
}

static ssize_t hml_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg,
			    uint64_t flags)
{
	ssize_t ret;

	if (!msg_op(ep, msg, flags, HML_WRITE, &ret))
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
