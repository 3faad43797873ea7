/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The send calls (fi_send, fi_tsend and their families): a send to an
 * endpoint of this process goes to the router (route.c), any other to the
 * provider unchanged.
 */
#include "hml_msg.h"
#include "hml_route.h"
#include "hml_stats.h"

enum { UNTAGGED, TAGGED };

static struct hml_ep *msg_ep(struct fid_ep *ep)
{
	return hml_container_of(ep->msg, struct hml_ep, msg.ops);
}

static struct hml_ep *tagged_ep(struct fid_ep *ep)
{
	return hml_container_of(ep->tagged, struct hml_ep, tagged.ops);
}

/* Another process's: the provider's, after what e's domain holds. */
static inline bool remote(struct hml_ep *e)
{
	hml_stat_pass(HML_WHY_REMOTE);
	hml_hold_flush(e->domain);
	return true;
}

/* Each call: resolve the destination (a few loads for another process),
 * and only for this process put the call in fi_msg_tagged form. */
#define LOCAL_SEND(e, iov, desc, count, dest, tag, ctx, data, flags,	\
		   tagged, inject, res) ({				\
	struct hml_ep *t_ = hml_target(e, dest);			\
	t_ ? hml_run_send(e, t_, &(struct fi_msg_tagged) {		\
		iov, desc, count, dest, tag, 0, ctx, data }, flags,	\
		tagged, inject, res) : remote(e); })

static ssize_t hml_send(struct fid_ep *ep, const void *buf, size_t len,
			void *desc, fi_addr_t dest, void *ctx)
{
	struct hml_ep *e = msg_ep(ep);
	ssize_t ret;

	if (!LOCAL_SEND(e, HML_IOV(buf, len), &desc, 1, dest, 0, ctx, 0,
		       e->tx_op_flags, UNTAGGED, false, &ret))
		return ret;
	return e->prov_msg->send(ep, buf, len, desc, dest, ctx);
}

static ssize_t hml_sendv(struct fid_ep *ep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t dest, void *ctx)
{
	struct hml_ep *e = msg_ep(ep);
	ssize_t ret;

	if (!LOCAL_SEND(e, iov, desc, count, dest, 0, ctx, 0, e->tx_op_flags,
		       UNTAGGED, false, &ret))
		return ret;
	return e->prov_msg->sendv(ep, iov, desc, count, dest, ctx);
}

static ssize_t hml_sendmsg(struct fid_ep *ep, const struct fi_msg *msg,
			   uint64_t flags)
{
	struct hml_ep *e = msg_ep(ep);
	ssize_t ret;

	if (!LOCAL_SEND(e, msg->msg_iov, msg->desc, msg->iov_count, msg->addr,
		       0, msg->context, msg->data, flags, UNTAGGED, false,
		       &ret))
		return ret;
	return e->prov_msg->sendmsg(ep, msg, flags);
}

static ssize_t hml_inject(struct fid_ep *ep, const void *buf, size_t len,
			  fi_addr_t dest)
{
	struct hml_ep *e = msg_ep(ep);
	ssize_t ret;

	if (!LOCAL_SEND(e, HML_IOV(buf, len), NULL, 1, dest, 0, NULL, 0,
		       e->tx_op_flags, UNTAGGED, true, &ret))
		return ret;
	return e->prov_msg->inject(ep, buf, len, dest);
}

static ssize_t hml_senddata(struct fid_ep *ep, const void *buf, size_t len,
			    void *desc, uint64_t data, fi_addr_t dest,
			    void *ctx)
{
	struct hml_ep *e = msg_ep(ep);
	ssize_t ret;

	if (!LOCAL_SEND(e, HML_IOV(buf, len), &desc, 1, dest, 0, ctx, data,
		       e->tx_op_flags | FI_REMOTE_CQ_DATA, UNTAGGED, false,
		       &ret))
		return ret;
	return e->prov_msg->senddata(ep, buf, len, desc, data, dest, ctx);
}

static ssize_t hml_injectdata(struct fid_ep *ep, const void *buf, size_t len,
			      uint64_t data, fi_addr_t dest)
{
	struct hml_ep *e = msg_ep(ep);
	ssize_t ret;

	if (!LOCAL_SEND(e, HML_IOV(buf, len), NULL, 1, dest, 0, NULL, data,
		       e->tx_op_flags | FI_REMOTE_CQ_DATA, UNTAGGED, true,
		       &ret))
		return ret;
	return e->prov_msg->injectdata(ep, buf, len, data, dest);
}

static ssize_t hml_tsend(struct fid_ep *ep, const void *buf, size_t len,
			 void *desc, fi_addr_t dest, uint64_t tag, void *ctx)
{
	struct hml_ep *e = tagged_ep(ep);
	ssize_t ret;

	if (!LOCAL_SEND(e, HML_IOV(buf, len), &desc, 1, dest, tag, ctx, 0,
		       e->tx_op_flags, TAGGED, false, &ret))
		return ret;
	return e->prov_tagged->send(ep, buf, len, desc, dest, tag, ctx);
}

static ssize_t hml_tsendv(struct fid_ep *ep, const struct iovec *iov,
			  void **desc, size_t count, fi_addr_t dest,
			  uint64_t tag, void *ctx)
{
	struct hml_ep *e = tagged_ep(ep);
	ssize_t ret;

	if (!LOCAL_SEND(e, iov, desc, count, dest, tag, ctx, 0, e->tx_op_flags,
		       TAGGED, false, &ret))
		return ret;
	return e->prov_tagged->sendv(ep, iov, desc, count, dest, tag, ctx);
}

static ssize_t hml_tsendmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg,
			    uint64_t flags)
{
	struct hml_ep *e = tagged_ep(ep), *t = hml_target(e, msg->addr);
	ssize_t ret;

	if (!t)
		remote(e);
	else if (!hml_run_send(e, t, msg, flags, TAGGED, false, &ret))
		return ret;
	return e->prov_tagged->sendmsg(ep, msg, flags);
}

static ssize_t hml_tinject(struct fid_ep *ep, const void *buf, size_t len,
			   fi_addr_t dest, uint64_t tag)
{
	struct hml_ep *e = tagged_ep(ep);
	ssize_t ret;

	if (!LOCAL_SEND(e, HML_IOV(buf, len), NULL, 1, dest, tag, NULL, 0,
		       e->tx_op_flags, TAGGED, true, &ret))
		return ret;
	return e->prov_tagged->inject(ep, buf, len, dest, tag);
}

static ssize_t hml_tsenddata(struct fid_ep *ep, const void *buf, size_t len,
			     void *desc, uint64_t data, fi_addr_t dest,
			     uint64_t tag, void *ctx)
{
	struct hml_ep *e = tagged_ep(ep);
	ssize_t ret;

	if (!LOCAL_SEND(e, HML_IOV(buf, len), &desc, 1, dest, tag, ctx, data,
		       e->tx_op_flags | FI_REMOTE_CQ_DATA, TAGGED, false,
		       &ret))
		return ret;
	return e->prov_tagged->senddata(ep, buf, len, desc, data, dest, tag,
					ctx);
}

static ssize_t hml_tinjectdata(struct fid_ep *ep, const void *buf, size_t len,
			       uint64_t data, fi_addr_t dest, uint64_t tag)
{
	struct hml_ep *e = tagged_ep(ep);
	ssize_t ret;

	if (!LOCAL_SEND(e, HML_IOV(buf, len), NULL, 1, dest, tag, NULL, data,
		       e->tx_op_flags | FI_REMOTE_CQ_DATA, TAGGED, true,
		       &ret))
		return ret;
	return e->prov_tagged->injectdata(ep, buf, len, data, dest, tag);
}

void hml_send_ops(struct fi_ops_msg *msg, struct fi_ops_tagged *tagged)
{
	if (msg) {
		hml_table_set(msg, send, hml_send);
		hml_table_set(msg, sendv, hml_sendv);
		hml_table_set(msg, sendmsg, hml_sendmsg);
		hml_table_set(msg, inject, hml_inject);
		hml_table_set(msg, senddata, hml_senddata);
		hml_table_set(msg, injectdata, hml_injectdata);
	}
	if (tagged) {
		hml_table_set(tagged, send, hml_tsend);
		hml_table_set(tagged, sendv, hml_tsendv);
		hml_table_set(tagged, sendmsg, hml_tsendmsg);
		hml_table_set(tagged, inject, hml_tinject);
		hml_table_set(tagged, senddata, hml_tsenddata);
		hml_table_set(tagged, injectdata, hml_tinjectdata);
	}
}
