/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Endpoints. Each has an EFA address and a shm endpoint named after it
 * (real EFA's efa_shm.c scheme), and every data operation goes straight to
 * that shm endpoint with the application's buffers, descriptors (ours are
 * shm's), addresses (ours are shm's) and context: what real EFA does for a
 * peer on the same host. Device memory is then host-copied by shm.
 */
#include <stdlib.h>
#include <string.h>

#include "efa.h"

static inline struct efa_ep *ep_of(struct fid_ep *ep)
{
	return efa_container(ep, struct efa_ep, ep);
}

static inline struct fid_ep *shm_of(struct fid_ep *ep)
{
	return ep_of(ep)->shm;
}

/* ---- fid ---- */

static int ep_close(struct fid *fid)
{
	struct efa_ep *e = efa_container(fid, struct efa_ep, ep.fid);

	return efa_close(&e->shm->fid, &e->magic, e);
}

static int ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct efa_ep *e = efa_container(fid, struct efa_ep, ep.fid);
	struct fid *inner;

	switch (bfid ? bfid->fclass : 0) {
	case FI_CLASS_CQ:
	case FI_CLASS_CNTR:
	case FI_CLASS_AV:
		inner = efa_inner(bfid);
		if (!inner)
			return -FI_EINVAL;
		return fi_ep_bind(e->shm, inner, flags);
	case FI_CLASS_EQ:
		return -FI_ENOSYS;	/* no EQs in this double */
	default:
		return -FI_EINVAL;
	}
}

/* As EFA's efa_ep_getflags/efa_ep_setflags: exactly one of FI_TRANSMIT
 * and FI_RECV says which. shm 1.17 has neither. */
static int opsflag(struct efa_ep *e, int command, uint64_t *flags)
{
	const uint64_t dir = FI_TRANSMIT | FI_RECV;
	uint64_t *which;

	if (!flags || (*flags & dir) == dir || !(*flags & dir))
		return -FI_EINVAL;
	which = *flags & FI_TRANSMIT ? &e->tx_flags : &e->rx_flags;
	if (command == FI_GETOPSFLAG)
		*flags = *which;
	else
		*which = *flags & ~dir;
	return 0;
}

static int min_multi_recv_to_shm(struct efa_ep *e)
{
	if (!e->min_multi_recv_set)
		return 0;
	return fi_setopt(&e->shm->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV,
			 &e->min_multi_recv, sizeof(e->min_multi_recv));
}

static int ep_control(struct fid *fid, int command, void *arg)
{
	struct efa_ep *e = efa_container(fid, struct efa_ep, ep.fid);
	/* shm 2.x takes FI_OPT_MIN_MULTI_RECV only before it is enabled. */
	bool early = FI_MAJOR(fi_version()) >= 2;
	int ret;

	switch (command) {
	case FI_ALIAS:
		return -FI_ENOSYS;	/* aliases would need proxies too */
	case FI_ENABLE:
		if (early && (ret = min_multi_recv_to_shm(e)))
			return ret;
		ret = fi_enable(e->shm);
		if (ret)
			return ret;
		e->enabled = true;
		return early ? 0 : min_multi_recv_to_shm(e);
	case FI_GETOPSFLAG:
	case FI_SETOPSFLAG:
		return opsflag(e, command, arg);
	default:
		return fi_control(&e->shm->fid, command, arg);
	}
}

EFA_FI_OPS(ep_fi_ops, ep_close, ep_bind, ep_control);

/* ---- fi_ops_ep ---- */

static ssize_t ep_cancel(fid_t fid, void *context)
{
	struct efa_ep *e = efa_container(fid, struct efa_ep, ep.fid);

	return fi_cancel(&e->shm->fid, context);
}

/* shm keeps FI_OPT_MIN_MULTI_RECV in a receive context it makes when
 * enabled: 1.17 crashes if the option comes sooner, 2.x ignores it if it
 * comes later. EFA takes it, and reads it back, any time. So the double
 * keeps it, and hands it to shm when enabling it and after. */
#define SHM_MIN_MULTI_RECV_DEFAULT 4096		/* shm's SMR_INJECT_SIZE */

static int ep_getopt(fid_t fid, int level, int optname, void *optval,
		     size_t *optlen)
{
	struct efa_ep *e = efa_container(fid, struct efa_ep, ep.fid);

	if ((!e->enabled || e->min_multi_recv_set) &&
	    level == FI_OPT_ENDPOINT && optname == FI_OPT_MIN_MULTI_RECV) {
		if (*optlen < sizeof(size_t))
			return -FI_ETOOSMALL;
		*(size_t *) optval = e->min_multi_recv_set ?
			e->min_multi_recv : SHM_MIN_MULTI_RECV_DEFAULT;
		*optlen = sizeof(size_t);
		return 0;
	}
	return fi_getopt(&e->shm->fid, level, optname, optval, optlen);
}

static int ep_setopt(fid_t fid, int level, int optname, const void *optval,
		     size_t optlen)
{
	struct efa_ep *e = efa_container(fid, struct efa_ep, ep.fid);

	if (level == FI_OPT_ENDPOINT && optname == FI_OPT_MIN_MULTI_RECV) {
		if (optlen != sizeof(size_t))
			return -FI_EINVAL;
		e->min_multi_recv = *(const size_t *) optval;
		e->min_multi_recv_set = true;
		return e->enabled ? min_multi_recv_to_shm(e) : 0;
	}
	return fi_setopt(&e->shm->fid, level, optname, optval, optlen);
}

static int no_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr,
		     struct fid_ep **tx_ep, void *context)
{
	(void) sep; (void) index; (void) attr; (void) tx_ep; (void) context;
	return -FI_ENOSYS;
}

static int no_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr,
		     struct fid_ep **rx_ep, void *context)
{
	(void) sep; (void) index; (void) attr; (void) rx_ep; (void) context;
	return -FI_ENOSYS;
}

/* Deprecated calls, forwarded through shm's table directly. */
static ssize_t ep_rx_size_left(struct fid_ep *ep)
{
	struct fid_ep *s = shm_of(ep);

	if (!FI_CHECK_OP(s->ops, struct fi_ops_ep, rx_size_left))
		return -FI_ENOSYS;
	return s->ops->rx_size_left(s);
}

static ssize_t ep_tx_size_left(struct fid_ep *ep)
{
	struct fid_ep *s = shm_of(ep);

	if (!FI_CHECK_OP(s->ops, struct fi_ops_ep, tx_size_left))
		return -FI_ENOSYS;
	return s->ops->tx_size_left(s);
}

static struct fi_ops_ep ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ep_cancel,
	.getopt = ep_getopt,
	.setopt = ep_setopt,
	.tx_ctx = no_tx_ctx,
	.rx_ctx = no_rx_ctx,
	.rx_size_left = ep_rx_size_left,
	.tx_size_left = ep_tx_size_left,
};

/* ---- fi_ops_cm ---- */

/* Real EFA copies the address out with whatever its pointer field holds;
 * too small a buffer gets the first bytes and -FI_ETOOSMALL. */
static int ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct efa_ep *e = efa_container(fid, struct efa_ep, ep.fid);
	struct efa_ep_addr a = e->addr;
	size_t n = *addrlen < EFA_EP_ADDR_LEN ? *addrlen : EFA_EP_ADDR_LEN;

	a.next = efa_garbage_ptr();
	memcpy(addr, &a, n);
	*addrlen = EFA_EP_ADDR_LEN;
	return n < EFA_EP_ADDR_LEN ? -FI_ETOOSMALL : 0;
}

static int ep_setname(fid_t fid, void *addr, size_t addrlen)
{
	(void) fid; (void) addr; (void) addrlen;
	return -FI_ENOSYS;
}

static int no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
	(void) ep; (void) addr; (void) addrlen;
	return -FI_ENOSYS;
}

static int no_connect(struct fid_ep *ep, const void *addr, const void *param,
		      size_t paramlen)
{
	(void) ep; (void) addr; (void) param; (void) paramlen;
	return -FI_ENOSYS;
}

static int no_listen(struct fid_pep *pep)
{
	(void) pep;
	return -FI_ENOSYS;
}

static int no_accept(struct fid_ep *ep, const void *param, size_t paramlen)
{
	(void) ep; (void) param; (void) paramlen;
	return -FI_ENOSYS;
}

static int no_reject(struct fid_pep *pep, fid_t handle, const void *param,
		     size_t paramlen)
{
	(void) pep; (void) handle; (void) param; (void) paramlen;
	return -FI_ENOSYS;
}

static int no_shutdown(struct fid_ep *ep, uint64_t flags)
{
	(void) ep; (void) flags;
	return -FI_ENOSYS;
}

static int no_join(struct fid_ep *ep, const void *addr, uint64_t flags,
		   struct fid_mc **mc, void *context)
{
	(void) ep; (void) addr; (void) flags; (void) mc; (void) context;
	return -FI_ENOSYS;
}

static struct fi_ops_cm ep_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = ep_setname,
	.getname = ep_getname,
	.getpeer = no_getpeer,
	.connect = no_connect,
	.listen = no_listen,
	.accept = no_accept,
	.reject = no_reject,
	.shutdown = no_shutdown,
	.join = no_join,
};

/* ---- messages ---- */

static inline bool own_tx(const struct efa_ep *e)
{
	return e->tx_flags != e->shm_tx_flags;
}

static inline bool own_rx(const struct efa_ep *e)
{
	return e->rx_flags != e->shm_rx_flags;
}

static ssize_t recv_own(struct efa_ep *e, const struct iovec *iov,
			void **desc, size_t count, fi_addr_t src_addr,
			void *context)
{
	struct fi_msg m = { .msg_iov = iov, .desc = desc, .iov_count = count,
			    .addr = src_addr, .context = context };

	return fi_recvmsg(e->shm, &m, e->rx_flags);
}

static ssize_t send_own(struct efa_ep *e, const struct iovec *iov,
			void **desc, size_t count, fi_addr_t dest_addr,
			uint64_t data, uint64_t flags, void *context)
{
	struct fi_msg m = { .msg_iov = iov, .desc = desc, .iov_count = count,
			    .addr = dest_addr, .context = context,
			    .data = data };

	return fi_sendmsg(e->shm, &m, e->tx_flags | flags);
}

static ssize_t msg_recvv(struct fid_ep *ep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t src_addr,
			 void *context)
{
	struct efa_ep *e = ep_of(ep);

	if (own_rx(e))
		return recv_own(e, iov, desc, count, src_addr, context);
	return fi_recvv(e->shm, iov, desc, count, src_addr, context);
}

static ssize_t msg_recv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			fi_addr_t src_addr, void *context)
{
	struct iovec iov = { buf, len };

	return msg_recvv(ep, &iov, &desc, 1, src_addr, context);
}

static ssize_t msg_recvmsg(struct fid_ep *ep, const struct fi_msg *msg,
			   uint64_t flags)
{
	return fi_recvmsg(shm_of(ep), msg, flags);
}

static ssize_t msg_sendv(struct fid_ep *ep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t dest_addr,
			 void *context)
{
	struct efa_ep *e = ep_of(ep);

	if (own_tx(e))
		return send_own(e, iov, desc, count, dest_addr, 0, 0, context);
	return fi_sendv(e->shm, iov, desc, count, dest_addr, context);
}

static ssize_t msg_send(struct fid_ep *ep, const void *buf, size_t len,
			void *desc, fi_addr_t dest_addr, void *context)
{
	struct iovec iov = { (void *) buf, len };

	return msg_sendv(ep, &iov, &desc, 1, dest_addr, context);
}

static ssize_t msg_sendmsg(struct fid_ep *ep, const struct fi_msg *msg,
			   uint64_t flags)
{
	return fi_sendmsg(shm_of(ep), msg, flags);
}

static ssize_t msg_inject(struct fid_ep *ep, const void *buf, size_t len,
			  fi_addr_t dest_addr)
{
	return fi_inject(shm_of(ep), buf, len, dest_addr);
}

static ssize_t msg_senddata(struct fid_ep *ep, const void *buf, size_t len,
			    void *desc, uint64_t data, fi_addr_t dest_addr,
			    void *context)
{
	struct efa_ep *e = ep_of(ep);
	struct iovec iov = { (void *) buf, len };

	if (own_tx(e))
		return send_own(e, &iov, &desc, 1, dest_addr, data,
				FI_REMOTE_CQ_DATA, context);
	return fi_senddata(e->shm, buf, len, desc, data, dest_addr, context);
}

static ssize_t msg_injectdata(struct fid_ep *ep, const void *buf, size_t len,
			      uint64_t data, fi_addr_t dest_addr)
{
	return fi_injectdata(shm_of(ep), buf, len, data, dest_addr);
}

static struct fi_ops_msg ep_msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = msg_recv,
	.recvv = msg_recvv,
	.recvmsg = msg_recvmsg,
	.send = msg_send,
	.sendv = msg_sendv,
	.sendmsg = msg_sendmsg,
	.inject = msg_inject,
	.senddata = msg_senddata,
	.injectdata = msg_injectdata,
};

/* ---- tagged messages ---- */

static ssize_t trecv_own(struct efa_ep *e, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t src_addr,
			 uint64_t tag, uint64_t ignore, void *context)
{
	struct fi_msg_tagged m = { .msg_iov = iov, .desc = desc,
				   .iov_count = count, .addr = src_addr,
				   .tag = tag, .ignore = ignore,
				   .context = context };

	return fi_trecvmsg(e->shm, &m, e->rx_flags);
}

static ssize_t tsend_own(struct efa_ep *e, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t dest_addr,
			 uint64_t tag, uint64_t data, uint64_t flags,
			 void *context)
{
	struct fi_msg_tagged m = { .msg_iov = iov, .desc = desc,
				   .iov_count = count, .addr = dest_addr,
				   .tag = tag, .context = context,
				   .data = data };

	return fi_tsendmsg(e->shm, &m, e->tx_flags | flags);
}

static ssize_t tag_recvv(struct fid_ep *ep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t src_addr,
			 uint64_t tag, uint64_t ignore, void *context)
{
	struct efa_ep *e = ep_of(ep);

	if (own_rx(e))
		return trecv_own(e, iov, desc, count, src_addr, tag, ignore,
				 context);
	return fi_trecvv(e->shm, iov, desc, count, src_addr, tag, ignore,
			 context);
}

static ssize_t tag_recv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
			void *context)
{
	struct iovec iov = { buf, len };

	return tag_recvv(ep, &iov, &desc, 1, src_addr, tag, ignore, context);
}

static ssize_t tag_recvmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg,
			   uint64_t flags)
{
	return fi_trecvmsg(shm_of(ep), msg, flags);
}

static ssize_t tag_sendv(struct fid_ep *ep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t dest_addr,
			 uint64_t tag, void *context)
{
	struct efa_ep *e = ep_of(ep);

	if (own_tx(e))
		return tsend_own(e, iov, desc, count, dest_addr, tag, 0, 0,
				 context);
	return fi_tsendv(e->shm, iov, desc, count, dest_addr, tag, context);
}

static ssize_t tag_send(struct fid_ep *ep, const void *buf, size_t len,
			void *desc, fi_addr_t dest_addr, uint64_t tag,
			void *context)
{
	struct iovec iov = { (void *) buf, len };

	return tag_sendv(ep, &iov, &desc, 1, dest_addr, tag, context);
}

static ssize_t tag_sendmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg,
			   uint64_t flags)
{
	return fi_tsendmsg(shm_of(ep), msg, flags);
}

static ssize_t tag_inject(struct fid_ep *ep, const void *buf, size_t len,
			  fi_addr_t dest_addr, uint64_t tag)
{
	return fi_tinject(shm_of(ep), buf, len, dest_addr, tag);
}

static ssize_t tag_senddata(struct fid_ep *ep, const void *buf, size_t len,
			    void *desc, uint64_t data, fi_addr_t dest_addr,
			    uint64_t tag, void *context)
{
	struct efa_ep *e = ep_of(ep);
	struct iovec iov = { (void *) buf, len };

	if (own_tx(e))
		return tsend_own(e, &iov, &desc, 1, dest_addr, tag, data,
				 FI_REMOTE_CQ_DATA, context);
	return fi_tsenddata(e->shm, buf, len, desc, data, dest_addr, tag,
			    context);
}

static ssize_t tag_injectdata(struct fid_ep *ep, const void *buf, size_t len,
			      uint64_t data, fi_addr_t dest_addr, uint64_t tag)
{
	return fi_tinjectdata(shm_of(ep), buf, len, data, dest_addr, tag);
}

static struct fi_ops_tagged ep_tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = tag_recv,
	.recvv = tag_recvv,
	.recvmsg = tag_recvmsg,
	.send = tag_send,
	.sendv = tag_sendv,
	.sendmsg = tag_sendmsg,
	.inject = tag_inject,
	.senddata = tag_senddata,
	.injectdata = tag_injectdata,
};

/* ---- RMA ---- */

static ssize_t rma_own(struct efa_ep *e, bool read, const struct iovec *iov,
		       void **desc, size_t count, fi_addr_t addr_,
		       uint64_t addr, uint64_t key, uint64_t data,
		       uint64_t flags, void *context)
{
	struct fi_rma_iov riov = { .addr = addr, .key = key };
	struct fi_msg_rma m = { .msg_iov = iov, .desc = desc,
				.iov_count = count, .addr = addr_,
				.rma_iov = &riov, .rma_iov_count = 1,
				.context = context, .data = data };

	for (size_t i = 0; i < count; i++)
		riov.len += iov[i].iov_len;
	if (read)
		return fi_readmsg(e->shm, &m, e->tx_flags | flags);
	return fi_writemsg(e->shm, &m, e->tx_flags | flags);
}

static ssize_t rma_readv(struct fid_ep *ep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t src_addr,
			 uint64_t addr, uint64_t key, void *context)
{
	struct efa_ep *e = ep_of(ep);

	if (own_tx(e))
		return rma_own(e, true, iov, desc, count, src_addr, addr, key,
			       0, 0, context);
	return fi_readv(e->shm, iov, desc, count, src_addr, addr, key,
			context);
}

static ssize_t rma_read(struct fid_ep *ep, void *buf, size_t len, void *desc,
			fi_addr_t src_addr, uint64_t addr, uint64_t key,
			void *context)
{
	struct iovec iov = { buf, len };

	return rma_readv(ep, &iov, &desc, 1, src_addr, addr, key, context);
}

static ssize_t rma_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg,
			   uint64_t flags)
{
	return fi_readmsg(shm_of(ep), msg, flags);
}

static ssize_t rma_writev(struct fid_ep *ep, const struct iovec *iov,
			  void **desc, size_t count, fi_addr_t dest_addr,
			  uint64_t addr, uint64_t key, void *context)
{
	struct efa_ep *e = ep_of(ep);

	if (own_tx(e))
		return rma_own(e, false, iov, desc, count, dest_addr, addr,
			       key, 0, 0, context);
	return fi_writev(e->shm, iov, desc, count, dest_addr, addr, key,
			 context);
}

static ssize_t rma_write(struct fid_ep *ep, const void *buf, size_t len,
			 void *desc, fi_addr_t dest_addr, uint64_t addr,
			 uint64_t key, void *context)
{
	struct iovec iov = { (void *) buf, len };

	return rma_writev(ep, &iov, &desc, 1, dest_addr, addr, key, context);
}

static ssize_t rma_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg,
			    uint64_t flags)
{
	return fi_writemsg(shm_of(ep), msg, flags);
}

static ssize_t rma_inject(struct fid_ep *ep, const void *buf, size_t len,
			  fi_addr_t dest_addr, uint64_t addr, uint64_t key)
{
	return fi_inject_write(shm_of(ep), buf, len, dest_addr, addr, key);
}

static ssize_t rma_writedata(struct fid_ep *ep, const void *buf, size_t len,
			     void *desc, uint64_t data, fi_addr_t dest_addr,
			     uint64_t addr, uint64_t key, void *context)
{
	struct efa_ep *e = ep_of(ep);
	struct iovec iov = { (void *) buf, len };

	if (own_tx(e))
		return rma_own(e, false, &iov, &desc, 1, dest_addr, addr, key,
			       data, FI_REMOTE_CQ_DATA, context);
	return fi_writedata(e->shm, buf, len, desc, data, dest_addr, addr,
			    key, context);
}

static ssize_t rma_injectdata(struct fid_ep *ep, const void *buf, size_t len,
			      uint64_t data, fi_addr_t dest_addr,
			      uint64_t addr, uint64_t key)
{
	return fi_inject_writedata(shm_of(ep), buf, len, data, dest_addr,
				   addr, key);
}

static struct fi_ops_rma ep_rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = rma_read,
	.readv = rma_readv,
	.readmsg = rma_readmsg,
	.write = rma_write,
	.writev = rma_writev,
	.writemsg = rma_writemsg,
	.inject = rma_inject,
	.writedata = rma_writedata,
	.injectdata = rma_injectdata,
};

/* ---- atomics: not in this double ---- */

static ssize_t no_atomic_write(struct fid_ep *ep, const void *buf,
			       size_t count, void *desc, fi_addr_t dest_addr,
			       uint64_t addr, uint64_t key,
			       enum fi_datatype datatype, enum fi_op op,
			       void *context)
{
	(void) ep; (void) buf; (void) count; (void) desc; (void) dest_addr;
	(void) addr; (void) key; (void) datatype; (void) op; (void) context;
	return -FI_ENOSYS;
}

static ssize_t no_atomic_writev(struct fid_ep *ep,
				const struct fi_ioc *iov, void **desc,
				size_t count, fi_addr_t dest_addr,
				uint64_t addr, uint64_t key,
				enum fi_datatype datatype, enum fi_op op,
				void *context)
{
	(void) ep; (void) iov; (void) desc; (void) count; (void) dest_addr;
	(void) addr; (void) key; (void) datatype; (void) op; (void) context;
	return -FI_ENOSYS;
}

static ssize_t no_atomic_writemsg(struct fid_ep *ep,
				  const struct fi_msg_atomic *msg,
				  uint64_t flags)
{
	(void) ep; (void) msg; (void) flags;
	return -FI_ENOSYS;
}

static ssize_t no_atomic_inject(struct fid_ep *ep, const void *buf,
				size_t count, fi_addr_t dest_addr,
				uint64_t addr, uint64_t key,
				enum fi_datatype datatype, enum fi_op op)
{
	(void) ep; (void) buf; (void) count; (void) dest_addr; (void) addr;
	(void) key; (void) datatype; (void) op;
	return -FI_ENOSYS;
}

static ssize_t no_atomic_readwrite(struct fid_ep *ep, const void *buf,
				   size_t count, void *desc, void *result,
				   void *result_desc, fi_addr_t dest_addr,
				   uint64_t addr, uint64_t key,
				   enum fi_datatype datatype, enum fi_op op,
				   void *context)
{
	(void) ep; (void) buf; (void) count; (void) desc; (void) result;
	(void) result_desc; (void) dest_addr; (void) addr; (void) key;
	(void) datatype; (void) op; (void) context;
	return -FI_ENOSYS;
}

static ssize_t no_atomic_readwritev(struct fid_ep *ep,
				    const struct fi_ioc *iov, void **desc,
				    size_t count, struct fi_ioc *resultv,
				    void **result_desc, size_t result_count,
				    fi_addr_t dest_addr, uint64_t addr,
				    uint64_t key, enum fi_datatype datatype,
				    enum fi_op op, void *context)
{
	(void) ep; (void) iov; (void) desc; (void) count; (void) resultv;
	(void) result_desc; (void) result_count; (void) dest_addr;
	(void) addr; (void) key; (void) datatype; (void) op; (void) context;
	return -FI_ENOSYS;
}

static ssize_t no_atomic_readwritemsg(struct fid_ep *ep,
				      const struct fi_msg_atomic *msg,
				      struct fi_ioc *resultv,
				      void **result_desc, size_t result_count,
				      uint64_t flags)
{
	(void) ep; (void) msg; (void) resultv; (void) result_desc;
	(void) result_count; (void) flags;
	return -FI_ENOSYS;
}

static ssize_t no_atomic_compwrite(struct fid_ep *ep, const void *buf,
				   size_t count, void *desc,
				   const void *compare, void *compare_desc,
				   void *result, void *result_desc,
				   fi_addr_t dest_addr, uint64_t addr,
				   uint64_t key, enum fi_datatype datatype,
				   enum fi_op op, void *context)
{
	(void) ep; (void) buf; (void) count; (void) desc; (void) compare;
	(void) compare_desc; (void) result; (void) result_desc;
	(void) dest_addr; (void) addr; (void) key; (void) datatype; (void) op;
	(void) context;
	return -FI_ENOSYS;
}

static ssize_t no_atomic_compwritev(struct fid_ep *ep,
				    const struct fi_ioc *iov, void **desc,
				    size_t count,
				    const struct fi_ioc *comparev,
				    void **compare_desc, size_t compare_count,
				    struct fi_ioc *resultv, void **result_desc,
				    size_t result_count, fi_addr_t dest_addr,
				    uint64_t addr, uint64_t key,
				    enum fi_datatype datatype, enum fi_op op,
				    void *context)
{
	(void) ep; (void) iov; (void) desc; (void) count; (void) comparev;
	(void) compare_desc; (void) compare_count; (void) resultv;
	(void) result_desc; (void) result_count; (void) dest_addr;
	(void) addr; (void) key; (void) datatype; (void) op; (void) context;
	return -FI_ENOSYS;
}

static ssize_t no_atomic_compwritemsg(struct fid_ep *ep,
				      const struct fi_msg_atomic *msg,
				      const struct fi_ioc *comparev,
				      void **compare_desc,
				      size_t compare_count,
				      struct fi_ioc *resultv,
				      void **result_desc,
				      size_t result_count, uint64_t flags)
{
	(void) ep; (void) msg; (void) comparev; (void) compare_desc;
	(void) compare_count; (void) resultv; (void) result_desc;
	(void) result_count; (void) flags;
	return -FI_ENOSYS;
}

static int no_atomic_valid(struct fid_ep *ep, enum fi_datatype datatype,
			   enum fi_op op, size_t *count)
{
	(void) ep; (void) datatype; (void) op; (void) count;
	return -FI_ENOSYS;
}

static struct fi_ops_atomic ep_atomic_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.write = no_atomic_write,
	.writev = no_atomic_writev,
	.writemsg = no_atomic_writemsg,
	.inject = no_atomic_inject,
	.readwrite = no_atomic_readwrite,
	.readwritev = no_atomic_readwritev,
	.readwritemsg = no_atomic_readwritemsg,
	.compwrite = no_atomic_compwrite,
	.compwritev = no_atomic_compwritev,
	.compwritemsg = no_atomic_compwritemsg,
	.writevalid = no_atomic_valid,
	.readwritevalid = no_atomic_valid,
	.compwritevalid = no_atomic_valid,
};

/* ---- creation ---- */

int efa_ep_open(struct fid_domain *domain, struct fi_info *info,
		struct fid_ep **ep, void *context)
{
	struct efa_domain *d = efa_container(domain, struct efa_domain, domain);
	char name[EFA_SHM_NAME_MAX];
	size_t namelen = sizeof(name);
	struct fi_info *shm_info;
	struct efa_ep *e;
	int ret;

	if (d->magic != EFA_MAGIC || !info)
		return -FI_EINVAL;
	if (info->ep_attr && info->ep_attr->type != FI_EP_RDM)
		return -FI_EINVAL;
	if ((info->caps & FI_HMEM) && efa_hmem_ep_refused()) {
		FI_INFO(&efa_prov, FI_LOG_EP_CTRL, "efa double: endpoint with "
			"FI_HMEM refused\n");
		return -FI_ENODATA;
	}
	if (info->caps & FI_HMEM)
		FI_INFO(&efa_prov, FI_LOG_EP_CTRL, "efa double: endpoint with "
			"FI_HMEM, inject_size %zu\n",
			info->tx_attr ? info->tx_attr->inject_size : 0);
	e = calloc(1, sizeof(*e));
	if (!e)
		return -FI_ENOMEM;
	ret = efa_shm_info(d->api_version, info, &shm_info);
	if (ret) {
		FI_WARN(&efa_prov, FI_LOG_EP_CTRL, "no shm info for this "
			"endpoint: %s\n", fi_strerror(-ret));
		free(e);
		return ret;
	}
	ret = fi_endpoint(d->shm, shm_info, &e->shm, &e->ep.fid);
	e->tx_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
	e->rx_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
	e->shm_tx_flags = shm_info->tx_attr->op_flags;
	e->shm_rx_flags = shm_info->rx_attr->op_flags;
	fi_freeinfo(shm_info);
	if (ret) {
		free(e);
		return ret;
	}

	/* The shm endpoint takes the name real EFA gives it, so that a peer
	 * holding only our EFA address finds it. */
	efa_new_addr(&e->addr);
	ret = efa_shm_name(&e->addr, name, &namelen);
	if (!ret)
		ret = fi_setname(&e->shm->fid, name, namelen);
	if (ret) {
		fi_close(&e->shm->fid);
		free(e);
		return ret;
	}
	FI_INFO(&efa_prov, FI_LOG_EP_CTRL, "endpoint qpn %u qkey %#x, shm "
		"name %s\n", e->addr.qpn, e->addr.qkey, name);

	e->domain = d;
	efa_fid_init(&e->ep.fid, &e->magic, FI_CLASS_EP, context, &ep_fi_ops);
	e->ep.ops = &ep_ops;
	e->ep.cm = &ep_cm_ops;
	e->ep.msg = &ep_msg_ops;
	e->ep.tagged = &ep_tagged_ops;
	e->ep.rma = &ep_rma_ops;
	e->ep.atomic = &ep_atomic_ops;
	*ep = &e->ep;
	return 0;
}
