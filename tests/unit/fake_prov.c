/* SPDX-License-Identifier: BSD-2-Clause */
/* The fake provider of fake_prov.h. */
#include <stdlib.h>
#include <string.h>

#include "fake_prov.h"

struct fake fake;

void fake_reset(void)
{
	memset(&fake, 0, sizeof(fake));
}

static void push_entry(void *ctx, uint64_t flags, size_t len, int err)
{
	if (fake.ncq < FAKE_MAX)
		fake.cq[fake.ncq++] = (struct fake_entry) { ctx, flags, len,
							    err };
}

static int held_at(void *ctx)
{
	for (int i = 0; i < fake.nheld; i++)
		if (fake.held[i] == ctx)
			return i;
	return -1;
}

bool fake_holds(void *ctx)
{
	return held_at(ctx) >= 0;
}

/* Take ctx from the receives the provider holds; false if not there. */
static bool unhold(void *ctx)
{
	int i = held_at(ctx);

	if (i < 0)
		return false;
	memmove(&fake.held[i], &fake.held[i + 1],
		(fake.nheld - i - 1) * sizeof(fake.held[0]));
	fake.nheld--;
	return true;
}

bool fake_arrive(void *ctx, size_t len)
{
	if (!unhold(ctx))
		return false;
	push_entry(ctx, FI_RECV | FI_MSG, len, 0);
	return true;
}

static ssize_t give(void *ctx, const struct iovec *iov)
{
	if (fake.nheld == FAKE_MAX || fake.ngiven == FAKE_MAX)
		return -FI_EAGAIN;
	fake.held[fake.nheld++] = ctx;
	fake.given_buf[fake.ngiven] = iov->iov_base;
	fake.given[fake.ngiven++] = ctx;
	return 0;
}

static ssize_t recvmsg(struct fid_ep *ep, const struct fi_msg *m,
		       uint64_t flags)
{
	(void) ep; (void) flags;
	return give(m->context, m->msg_iov);
}

static ssize_t trecvmsg(struct fid_ep *ep, const struct fi_msg_tagged *m,
			uint64_t flags)
{
	(void) ep; (void) flags;
	return give(m->context, m->msg_iov);
}

static ssize_t cancel(fid_t fid, void *ctx)
{
	(void) fid;
	fake.cancels++;
	if (fake.on_cancel)
		fake.on_cancel(ctx);
	if (fake.cancel_ret)
		return fake.cancel_ret;
	if (ctx == fake.refuse)
		return -FI_EBUSY;
	if (unhold(ctx) && fake.answer == FAKE_ANSWER)
		push_entry(ctx, FI_RECV | FI_MSG, 0, FI_ECANCELED);
	return 0;
}

static int getopt(fid_t fid, int level, int name, void *val, size_t *len)
{
	(void) fid;
	if (level != FI_OPT_ENDPOINT || name != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	*(size_t *) val = fake.min_multi;
	*len = sizeof(size_t);
	return 0;
}

static ssize_t cq_read(struct fid_cq *cq, void *buf, size_t count)
{
	struct fi_cq_tagged_entry *out = buf;
	size_t n = 0;

	(void) cq;
	while (n < count && fake.cqhead < fake.ncq &&
	       !fake.cq[fake.cqhead].err) {
		struct fake_entry *x = &fake.cq[fake.cqhead++];

		out[n++] = (struct fi_cq_tagged_entry) {
			.op_context = x->ctx, .flags = x->flags, .len = x->len,
		};
	}
	if (n)
		return n;
	return fake.cqhead < fake.ncq ? -FI_EAVAIL : -FI_EAGAIN;
}

static ssize_t cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf,
			  uint64_t flags)
{
	struct fake_entry *x = &fake.cq[fake.cqhead];

	(void) cq; (void) flags;
	if (fake.cqhead == fake.ncq || !x->err)
		return -FI_EAGAIN;
	fake.cqhead++;
	buf->op_context = x->ctx;
	buf->flags = x->flags;
	buf->len = x->len;
	buf->err = x->err;
	buf->prov_errno = -x->err;
	buf->err_data_size = 0;
	return 1;
}

static struct fi_ops_ep ep_ops = {
	.size = sizeof(ep_ops), .cancel = cancel, .getopt = getopt,
};
static struct fi_ops_msg msg_ops = {
	.size = sizeof(msg_ops), .recvmsg = recvmsg,
};
static struct fi_ops_tagged tagged_ops = {
	.size = sizeof(tagged_ops), .recvmsg = trecvmsg,
};
static struct fi_ops_cq cq_ops = {
	.size = sizeof(cq_ops), .read = cq_read, .readerr = cq_readerr,
};

void fake_domain(struct hml_domain *d, struct hml_fabric *f,
		 enum fi_progress progress, uint64_t caps)
{
	struct fi_domain_attr attr = { .data_progress = progress };
	struct fi_info info = { .caps = caps, .domain_attr = &attr };

	memset(d, 0, sizeof(*d));
	f->api_version = FI_VERSION(1, 20);
	d->fabric = f;
	hml_hold_domain(d, &info);
}

void fake_ep_open(struct fake_ep *f, struct hml_domain *d, uint64_t caps,
		  bool cq)
{
	memset(f, 0, sizeof(*f));
	f->fid.fid.fclass = FI_CLASS_EP;
	f->fid.ops = &ep_ops;
	f->e.h.fid = &f->fid.fid;
	f->e.ep = &f->fid;
	f->e.prov_ops = &ep_ops;
	f->e.prov_msg = &msg_ops;
	f->e.prov_tagged = &tagged_ops;
	f->e.base = &f->e;
	f->e.domain = d;
	f->e.caps = caps;
	hml_inflight_init(&f->e);
	pthread_mutex_init(&f->cq.lock, NULL);
	f->fcq.ops = &cq_ops;
	f->cq.cq = &f->fcq;
	f->cq.prov = &cq_ops;
	f->cq.domain = d;
	f->cq.format = FI_CQ_FORMAT_TAGGED;
	f->cq.entry_size = sizeof(struct fi_cq_tagged_entry);
	f->cq.size = HML_CQ_DEFAULT_SIZE;
	f->cq.wait_obj = FI_WAIT_NONE;
	if (cq)
		f->e.rx_cq = &f->cq;
	f->q = hml_rxq_new(&f->e, &f->e);
	if (cq)
		hml_rx_watch(&f->cq, f->q);
	hml_hold_queue(f->q, true);
	f->e.rxq = f->q;
}

void fake_ep_close(struct fake_ep *f)
{
	struct hml_cqe e;

	hml_rxq_free(f->q);
	while (fake_entry(&f->cq, &e))
		;
	free(f->cq.ring);
	pthread_mutex_destroy(&f->cq.lock);
	hml_inflight_fini(&f->e);
}

struct hml_rx *fake_rx(struct hml_rxq *q, int tagged, void *ctx, void *buf,
		       size_t len, uint64_t flags)
{
	struct iovec iov = { buf, len };
	struct fi_msg_tagged m = {
		.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC,
		.context = ctx,
	};
	struct hml_rx *r;

	pthread_mutex_lock(&q->lock);
	r = hml_rx_new(q, q->owner->ep, &m, flags, tagged);
	pthread_mutex_unlock(&q->lock);
	return r;
}

void fake_place(struct hml_rxq *q, struct hml_rx *r, int state)
{
	pthread_mutex_lock(&q->lock);
	if (state == HML_RX_KEPT) {
		r->state = state;
		hml_rx_link(q, r);
	} else if (state == HML_RX_HELD) {
		hml_hold(q, r);
	} else {
		hml_rx_post(q, r);
		pthread_mutex_lock(&q->lock);
		r->state = state;
	}
	pthread_mutex_unlock(&q->lock);
}

bool fake_entry(struct hml_cq *cq, struct hml_cqe *e)
{
	struct fi_cq_tagged_entry t;
	struct hml_cq_err x = { 0 };

	if (hml_cq_take(cq, &t, 1, NULL) == 1) {
		*e = (struct hml_cqe) {
			.op_context = t.op_context, .flags = t.flags,
			.len = t.len, .buf = t.buf, .data = t.data,
			.tag = t.tag,
		};
		return true;
	}
	if (!hml_cq_take_err(cq, &x))
		return false;
	*e = (struct hml_cqe) {
		.op_context = x.op_context, .flags = x.flags, .len = x.len,
		.buf = x.buf, .err = x.err, .olen = x.olen,
	};
	return true;
}
