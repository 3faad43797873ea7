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
 * The sender opens unbound (t_opts.open_only): its name, its enable and
 * its fi_setname are the subject. Run by the harness with and without
 * hmemloop ("digest:" lines).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmltest.h"

#define LEN 64

static const struct t_opts caps = {
	.caps = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE,
};

/* The sender, opened unbound: its name, its fi_enable and its fi_setname
 * are the subject. */
static void sender_new(struct t_fabric *f, struct t_ep *s)
{
	t_ep_open(s, f, &(struct t_opts) { .open_only = true });
}

static int name_of(struct t_ep *s)
{
	s->namelen = sizeof(s->name);
	return fi_getname(&s->ep->fid, s->name, &s->namelen);
}

/* s sends to r, which receives from src only: the message lands, and
 * FI_SOURCE says src. */
static void directed_one(struct t_ep *s, struct t_ep *r, fi_addr_t src,
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

static void directed(struct t_ep *s, struct t_ep *r, fi_addr_t src,
		     const char *what)
{
	fi_addr_t to = t_insert(s, r->name);

	/* Tagged first: an untagged directed receive has hmemloop look its
	 * source up. */
	directed_one(s, r, src, to, true, what);
	directed_one(s, r, src, to, false, what);
}

/* The fabric and the receiver of a case; false, said in a digest line,
 * where the case cannot run. shm maps a peer's region at fi_av_insert: a
 * name read before fi_enable, or a closed endpoint's, has none yet, and
 * shm alone crashes in its progress. */
static bool open_receiver(struct t_fabric *f, struct t_ep *r,
			  const char *what)
{
	if (!strcmp(t_prov, "shm")) {
		printf("digest: %s: not run: shm maps a peer at "
		       "fi_av_insert\n", what);
		return false;
	}
	if (t_try_open(f, &caps) == -FI_ENODATA) {
		printf("digest: %s: no FI_DIRECTED_RECV here\n", what);
		return false;
	}
	t_ep_open(r, f, &caps);
	return true;
}

static void before_enable(void)
{
	const char *what = "a name read before fi_enable";
	struct t_fabric f;
	struct t_ep s, r;
	char before[256];
	size_t blen;
	fi_addr_t src;

	if (!open_receiver(&f, &r, what))
		return;
	sender_new(&f, &s);
	if (name_of(&s)) {
		printf("digest: %s: %s gives no name before fi_enable\n", what,
		       t_prov);
		goto out;
	}
	memcpy(before, s.name, s.namelen);
	blen = s.namelen;
	src = t_insert(&r, s.name);
	t_fi(t_ep_enable(&s, NULL, NULL));
	if (s.namelen != blen || memcmp(before, s.name, blen)) {
		printf("digest: %s: %s renames it at fi_enable\n", what, t_prov);
		goto out;
	}
	directed(&s, &r, src, what);
out:
	t_ep_close(&s);
	t_ep_close(&r);
	t_close(&f);
}

static void setname(void)
{
	const char *what = "a closed endpoint's name, taken by fi_setname";
	struct t_ep x, y, r;
	struct t_fabric f;
	fi_addr_t src;
	int ret;

	if (!open_receiver(&f, &r, what))
		return;
	t_ep_open(&x, &f, NULL);
	src = t_insert(&r, x.name);
	sender_new(&f, &y);
	memcpy(y.name, x.name, x.namelen);
	y.namelen = x.namelen;
	t_ep_close(&x);
	ret = fi_setname(&y.ep->fid, y.name, y.namelen);
	if (ret) {
		printf("digest: %s: %s has no fi_setname before fi_enable (%d)\n",
		       what, t_prov, ret);
		goto out;
	}
	t_fi(t_ep_enable(&y, NULL, NULL));
	directed(&y, &r, src, what);
out:
	t_ep_close(&y);
	t_ep_close(&r);
	t_close(&f);
}

static const struct t_case cases[] = {
	T_CASE("before-enable", before_enable),
	T_CASE("setname", setname),
};

T_MAIN(cases);
