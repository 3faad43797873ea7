/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Held receives (shim/msg/hold.c), on a fake provider: when a domain may
 * keep a receive from the provider (hml_hold_may: manual data progress,
 * none of HML_HOLD_NEVER's capabilities on it or an endpoint of it, no
 * one asleep in the provider, no event queue, no multi-receive buffer),
 * and what a flush gives the provider: every receive its queues hold, each
 * queue's in the order they were posted, none a sender has taken, none of
 * another domain's. A failure names the rule broken.
 */
#include <string.h>

#include "fake_prov.h"
#include "unit.h"

static const struct may {
	const char *rule;
	enum fi_progress progress;
	uint64_t caps;		/* the domain's */
	uint64_t ep_caps;	/* an endpoint's opened on it */
	int off;		/* threads asleep in the provider on it */
	int neqs;		/* event queues of its fabric */
	uint64_t flags;		/* the receive's */
	bool may;
} mays[] = {
	{ "under manual data progress a receive is held",
	  FI_PROGRESS_MANUAL, .may = true },
	{ "under automatic data progress none is",
	  FI_PROGRESS_AUTO, .may = false },
	{ "none in a domain opened with FI_ATOMIC",
	  FI_PROGRESS_MANUAL, .caps = FI_ATOMIC | FI_MSG },
	{ "none in a domain opened with FI_COLLECTIVE",
	  FI_PROGRESS_MANUAL, .caps = FI_COLLECTIVE | FI_MSG },
	{ "none once an endpoint of the domain has FI_ATOMIC",
	  FI_PROGRESS_MANUAL, .ep_caps = FI_ATOMIC | FI_MSG },
	{ "an endpoint with calls hmemloop wraps changes nothing",
	  FI_PROGRESS_MANUAL, .ep_caps = FI_MSG | FI_TAGGED | FI_RMA,
	  .may = true },
	{ "none while a thread may sleep in the provider (holds_off)",
	  FI_PROGRESS_MANUAL, .off = 1 },
	{ "none once the fabric has an event queue",
	  FI_PROGRESS_MANUAL, .neqs = 1 },
	{ "a multi-receive buffer is never held",
	  FI_PROGRESS_MANUAL, .flags = FI_MULTI_RECV },
	{ "other receive flags change nothing",
	  FI_PROGRESS_MANUAL, .flags = FI_COMPLETION, .may = true },
};

static bool may_hold(struct fake_ep *t, uint64_t flags)
{
	bool may;

	pthread_mutex_lock(&t->q->lock);
	may = hml_hold_may(t->q, flags);
	pthread_mutex_unlock(&t->q->lock);
	return may;
}

static void may(const struct may *w)
{
	struct hml_fabric f = { .neqs = w->neqs };
	struct hml_domain d;
	struct fake_ep t;

	fake_reset();
	fake_domain(&d, &f, w->progress, w->caps);
	fake_ep_open(&t, &d, 0, true);
	if (w->ep_caps)
		hml_hold_caps(&d, w->ep_caps);
	hml_hold_off(&d, w->off);
	u_check(may_hold(&t, w->flags) == w->may, "%s", w->rule);
	/* What holds holding off lasts as long as it does. */
	if (w->off) {
		hml_hold_off(&d, -w->off);
		u_check(may_hold(&t, w->flags), "%s, and again when it "
			"wakes", w->rule);
	}
	fake_ep_close(&t);
	hml_hold_domain_fini(&d);
}

/* A receive of q, held. */
static struct hml_rx *held(struct fake_ep *t, int tagged, char *ctx)
{
	struct hml_rx *r = fake_rx(t->q, tagged, ctx, NULL, 0, 0);

	fake_place(t->q, r, HML_RX_HELD);
	return r;
}

/* Given to the provider, in this order among themselves, each once. */
static bool given_in_order(struct hml_rx *const *r, int n)
{
	int last = -1;

	for (int i = 0; i < n; i++) {
		int at = -1;

		for (int j = 0; j < fake.ngiven; j++) {
			if (fake.given[j] != &r[i]->ctx)
				continue;
			if (at >= 0)
				return false;
			at = j;
		}
		if (at <= last || r[i]->state != HML_RX_POSTED)
			return false;
		last = at;
	}
	return true;
}

static bool given(const struct hml_rx *r)
{
	for (int j = 0; j < fake.ngiven; j++)
		if (fake.given[j] == &r->ctx)
			return true;
	return false;
}

/*
 * Endpoints a and b of domain d, c of domain d2, receives held in both
 * lists of a, in b and in c; a sender takes one of a's. A flush of d gives
 * the provider a's and b's, each list in posting order, and neither the
 * one taken nor c's; a flush of every domain gives c's. Holding turned off
 * (a thread going to sleep in the provider, an endpoint with FI_ATOMIC)
 * flushes first.
 */
static void flush(void)
{
	struct hml_fabric f = { 0 }, f2 = { 0 };
	struct hml_rx *ra[5], *rb[2], *rc, *x;
	struct hml_domain d, d2;
	struct fake_ep a, b, c;
	char ctx[8];

	fake_reset();
	fake_domain(&d, &f, FI_PROGRESS_MANUAL, FI_MSG);
	fake_domain(&d2, &f2, FI_PROGRESS_MANUAL, FI_MSG);
	fake_ep_open(&a, &d, 0, true);
	fake_ep_open(&b, &d, 0, true);
	fake_ep_open(&c, &d2, 0, true);
	ra[0] = held(&a, HML_UNTAGGED, &ctx[0]);
	rb[0] = held(&b, HML_UNTAGGED, &ctx[1]);
	ra[1] = held(&a, HML_TAGGED, &ctx[2]);
	ra[2] = held(&a, HML_UNTAGGED, &ctx[3]);
	x = held(&a, HML_UNTAGGED, &ctx[4]);
	rc = held(&c, HML_UNTAGGED, &ctx[5]);
	ra[3] = held(&a, HML_TAGGED, &ctx[6]);
	rb[1] = held(&b, HML_UNTAGGED, &ctx[7]);
	pthread_mutex_lock(&a.q->lock);
	hml_hold_taken(a.q, x);
	hml_rx_free(x);
	pthread_mutex_unlock(&a.q->lock);
	u_check(!fake.ngiven && d.held == 6 && a.q->nheld == 4,
		"held receives are not the provider's: %d given, %d held",
		fake.ngiven, d.held);

	hml_hold_flush(&d);
	u_check(given_in_order((struct hml_rx *[]) { ra[0], ra[2] }, 2) &&
		given_in_order((struct hml_rx *[]) { ra[1], ra[3] }, 2) &&
		given_in_order(rb, 2), "a flush gives each queue's held "
		"receives to the provider in posting order, each list's");
	u_check(fake.ngiven == 6 && d.held == 0 && !a.q->nheld &&
		!b.q->nheld, "a flush leaves nothing held in its domain, and "
		"gives no receive a sender took: %d given", fake.ngiven);
	u_check(!given(rc) && d2.held == 1, "a flush of one domain leaves "
		"another's held");
	hml_hold_flush_every();
	u_check(given(rc) && rc->state == HML_RX_POSTED && !d2.held,
		"a flush of every domain flushes each");

	ra[4] = held(&a, HML_TAGGED, &ctx[0]);
	hml_hold_off(&d, 1);
	u_check(given(ra[4]) && !d.held, "holding off (a thread asleep in "
		"the provider) flushes first");
	hml_hold_off(&d, -1);
	ra[4] = held(&a, HML_TAGGED, &ctx[1]);
	hml_hold_caps(&d, FI_ATOMIC);
	u_check(given(ra[4]) && !d.held && !may_hold(&a, 0),
		"an endpoint with FI_ATOMIC flushes its domain first");

	fake_reset();
	fake_ep_close(&a);
	fake_ep_close(&b);
	fake_ep_close(&c);
	hml_hold_domain_fini(&d);
	hml_hold_domain_fini(&d2);
}

int main(void)
{
	for (size_t i = 0; i < sizeof(mays) / sizeof(mays[0]); i++)
		may(&mays[i]);
	flush();
	return u_done("hold: when a receive is held, and what a flush gives");
}
