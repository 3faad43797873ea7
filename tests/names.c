/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * An endpoint of this process is recognised by its name whenever the name
 * entered an address vector (issue 28, case 3): a directed receive from it
 * completes, and FI_SOURCE names it, as the provider alone does it on host
 * memory.
 *
 *   before-enable  the sender's name, read before fi_enable (tcp;ofi_rxm
 *                  and udp;ofi_rxd give one), goes into the receiver's AV
 *                  before the sender is enabled
 *   setname        a new endpoint takes, with fi_setname, the name of one
 *                  that closed after its name went into the receiver's AV
 *
 * The sender opens by hand: its name, its enable and its fi_setname are
 * the subject. Run by the harness with and without hmemloop ("digest:"
 * lines).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmltest.h"

#define LEN 64

static const struct t_opts caps = {
	.caps = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE,
};

struct sender {
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	char name[256];
	size_t len;
};

static void sender_new(struct t_fabric *f, struct sender *s)
{
	struct fi_cq_attr cq = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_av_attr av = { .type = FI_AV_TABLE };

	memset(s, 0, sizeof(*s));
	t_fi(fi_cq_open(f->domain, &cq, &s->cq, NULL));
	t_fi(fi_endpoint(f->domain, f->info, &s->ep, NULL));
	t_fi(fi_av_open(f->domain, &av, &s->av, NULL));
}

static void sender_enable(struct sender *s)
{
	t_fi(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
	t_fi(fi_ep_bind(s->ep, &s->av->fid, 0));
	t_fi(fi_enable(s->ep));
	t_progress(s->cq);
}

static int name_of(struct sender *s)
{
	s->len = sizeof(s->name);
	return fi_getname(&s->ep->fid, s->name, &s->len);
}

static void sender_close(struct sender *s)
{
	t_unprogress(s->cq);
	t_fi(fi_close(&s->ep->fid));
	t_fi(fi_close(&s->av->fid));
	t_fi(fi_close(&s->cq->fid));
}

/* s sends to r, which receives from src only: the message lands, and
 * FI_SOURCE says src. */
static void directed_one(struct sender *s, struct t_ep *r, fi_addr_t src,
			 fi_addr_t to, bool tagged, const char *what)
{
	char out[LEN], in[LEN] = { 0 };
	struct fi_cq_tagged_entry e;
	fi_addr_t from = FI_ADDR_NOTAVAIL;
	int sctx, rctx;
	double end = t_now() + t_wait_s();
	ssize_t ret;

	t_fill(out, LEN, 9);
	if (tagged) {
		t_fi(fi_trecv(r->ep, in, LEN, NULL, src, 7, 0, &rctx));
		t_post(s->cq, fi_tsend(s->ep, out, LEN, NULL, to, 7, &sctx));
	} else {
		t_fi(fi_recv(r->ep, in, LEN, NULL, src, &rctx));
		t_post(s->cq, fi_send(s->ep, out, LEN, NULL, to, &sctx));
	}
	while ((ret = fi_cq_readfrom(r->cq, &e, 1, &from)) == -FI_EAGAIN &&
	       t_now() < end)
		t_drive(r->cq);
	t_assert(ret == 1, "%s: the directed receive did not complete: %zd",
		 what, ret);
	t_assert(e.op_context == &rctx && e.len == LEN && t_check(in, LEN, 9),
		 "%s: context %p, %zu bytes", what, e.op_context, e.len);
	t_assert(from == src, "%s: FI_SOURCE %#lx, expected %#lx", what,
		 (unsigned long) from, (unsigned long) src);
	t_expect(s->cq, &sctx, FI_SEND, (size_t) -1);
	printf("digest: %s: %s received from its source, FI_SOURCE its "
	       "fi_addr\n", what, tagged ? "tagged" : "untagged");
}

static void directed(struct sender *s, struct t_ep *r, fi_addr_t src,
		     const char *what)
{
	fi_addr_t to = FI_ADDR_NOTAVAIL;

	t_assert(fi_av_insert(s->av, r->name, 1, &to, 0, NULL) == 1,
		 "%s: fi_av_insert", what);
	/* Tagged first: an untagged directed receive has hmemloop look its
	 * source up. */
	directed_one(s, r, src, to, true, what);
	directed_one(s, r, src, to, false, what);
}

/* shm maps a peer's region at fi_av_insert: a name read before fi_enable,
 * or a closed endpoint's, has none yet, and shm alone crashes in its
 * progress. */
static bool mapped_at_insert(const char *what)
{
	if (strcmp(t_prov, "shm"))
		return false;
	printf("digest: %s: not run: shm maps a peer at fi_av_insert\n", what);
	return true;
}

static bool open_receiver(struct t_fabric *f, struct t_ep *r)
{
	if (t_try_open(f, &caps) == -FI_ENODATA)
		return false;
	t_ep_open(r, f, &caps);
	return true;
}

static void before_enable(void)
{
	const char *what = "a name read before fi_enable";
	struct t_fabric f;
	struct sender s;
	struct t_ep r;
	char before[256];
	size_t blen;
	fi_addr_t src;

	if (mapped_at_insert(what))
		return;
	if (!open_receiver(&f, &r)) {
		printf("digest: %s: no FI_DIRECTED_RECV here\n", what);
		return;
	}
	sender_new(&f, &s);
	if (name_of(&s)) {
		printf("digest: %s: %s gives no name before fi_enable\n", what,
		       t_prov);
		goto out;
	}
	memcpy(before, s.name, s.len);
	blen = s.len;
	src = t_insert(&r, s.name);
	sender_enable(&s);
	t_fi(name_of(&s));
	if (s.len != blen || memcmp(before, s.name, blen)) {
		printf("digest: %s: %s renames it at fi_enable\n", what, t_prov);
		goto out;
	}
	directed(&s, &r, src, what);
out:
	sender_close(&s);
	t_ep_close(&r);
	t_close(&f);
}

static void setname(void)
{
	const char *what = "a closed endpoint's name, taken by fi_setname";
	struct sender x, y;
	struct t_fabric f;
	struct t_ep r;
	fi_addr_t src;
	int ret;

	if (mapped_at_insert(what))
		return;
	if (!open_receiver(&f, &r)) {
		printf("digest: %s: no FI_DIRECTED_RECV here\n", what);
		return;
	}
	sender_new(&f, &x);
	sender_enable(&x);
	t_fi(name_of(&x));
	src = t_insert(&r, x.name);
	sender_new(&f, &y);
	memcpy(y.name, x.name, x.len);
	y.len = x.len;
	sender_close(&x);
	ret = fi_setname(&y.ep->fid, y.name, y.len);
	if (ret) {
		printf("digest: %s: %s has no fi_setname before fi_enable (%d)\n",
		       what, t_prov, ret);
		goto out;
	}
	sender_enable(&y);
	directed(&y, &r, src, what);
out:
	sender_close(&y);
	t_ep_close(&r);
	t_close(&f);
}

static const struct t_case cases[] = {
	T_CASE("before-enable", before_enable),
	T_CASE("setname", setname),
};

int main(int argc, char **argv)
{
	t_init(argc, argv, NULL);
	T_RUN_CASES(cases);
	t_cases_done();
	return 0;
}
