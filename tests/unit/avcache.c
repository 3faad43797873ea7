/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The AV's verdict cache (hml_av_target): whether an fi_addr is an
 * endpoint of this process, asked of the provider's AV (a fake one here,
 * which counts the lookups) once per address and kept; asked again when
 * the registry or the AV changes, and never kept for an endpoint that
 * closed. Past the table's growth every verdict still holds; a scalable
 * endpoint's address chooses its receive context by its high bits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hml_av.h"
#include "unit.h"

#define N 1000			/* addresses: past the first table's 64 */

static char names[N][32];	/* what the provider's AV holds */
static int lookups;

static int av_lookup(struct fid_av *av, fi_addr_t addr, void *buf,
		     size_t *len)
{
	size_t n;

	(void) av;
	lookups++;
	if (addr >= N)
		return -FI_EINVAL;
	n = strlen(names[addr]) + 1;
	memcpy(buf, names[addr], n < *len ? n : *len);
	*len = n;
	return 0;
}

static int ep_getopt(fid_t fid, int level, int name, void *val, size_t *len)
{
	(void) fid; (void) level; (void) name; (void) val; (void) len;
	return -FI_ENOPROTOOPT;
}

static struct fi_ops_av av_ops = {
	.size = sizeof(av_ops), .lookup = av_lookup,
};
static struct fi_ops_ep ep_ops = {
	.size = sizeof(ep_ops), .getopt = ep_getopt,
};

/* An enabled endpoint of this process, named name. */
static void ep_init(struct hml_ep *e, struct fid_ep *prov, const char *name)
{
	prov->ops = &ep_ops;
	e->ep = prov;
	e->base = e;
	e->addr_format = FI_ADDR_STR;
	e->namelen = strlen(name) + 1;
	memcpy(e->name, name, e->namelen);
	hml_self_add(e);
}

/* Every address's verdict: a, b or none; and how many lookups it took. */
static int check_all(struct hml_av *av, fi_addr_t at_a, struct hml_ep *a,
		     fi_addr_t at_b, struct hml_ep *b)
{
	int before = lookups;

	for (fi_addr_t i = 0; i < N; i++) {
		struct hml_ep *want = i == at_a ? a : i == at_b ? b : NULL;
		struct hml_ep *got = hml_av_target(av, i);

		u_check(got == want, "fi_addr %lu: endpoint %p, expected %p",
			(unsigned long) i, (void *) got, (void *) want);
	}
	return lookups - before;
}

int main(void)
{
	struct fid_ep pa, pb, ps;
	struct hml_ep a = { 0 }, b = { 0 }, s = { 0 }, ctx[4] = { 0 };
	struct hml_ep *ctxs[4] = { &ctx[0], &ctx[1], &ctx[2], &ctx[3] };
	struct fid_av fav = { 0 };
	struct hml_av av = { 0 };
	int n;

	for (int i = 0; i < N; i++)
		snprintf(names[i], sizeof(names[i]), "fi_sockets://10.0.0.2:%d",
			 1000 + i);
	strcpy(names[3], "fi_shm://a");
	av.prov = &av_ops;
	av.av = &fav;
	av.addr_format = FI_ADDR_STR;
	pthread_mutex_init(&av.lock, NULL);
	u_check(hml_av_cache_init(&av) == 0, "init failed");
	ep_init(&a, &pa, "fi_shm://a");

	n = check_all(&av, 3, &a, N, NULL);
	u_check(n == N, "%d lookups for %d new addresses", n, N);
	n = check_all(&av, 3, &a, N, NULL);
	u_check(n == 0, "%d lookups for addresses known", n);
	u_check(hml_av_source(&av, &a) == 3, "a's source address %lu, not 3",
		(unsigned long) hml_av_source(&av, &a));

	/* The registry changes: b opens, at an address that was another
	 * process's. Every verdict is asked again, once. */
	strcpy(names[5], "fi_shm://b");
	ep_init(&b, &pb, "fi_shm://b");
	n = check_all(&av, 3, &a, 5, &b);
	u_check(n == N, "%d lookups after the registry changed", n);
	n = check_all(&av, 3, &a, 5, &b);
	u_check(n == 0, "%d lookups for addresses known again", n);

	/* The AV changes (an address removed, another inserted at its
	 * index): asked again. */
	strcpy(names[5], "fi_sockets://10.0.0.3:1");
	hml_av_changed(&av);
	n = check_all(&av, 3, &a, N, NULL);
	u_check(n == N, "%d lookups after the AV changed", n);

	/* a closes: no address is a any more, cached or not. */
	hml_self_remove(&a);
	hml_av_cache_forget(&av, &a);
	hml_av_locals_forget(&av, &a);
	u_check(hml_av_target(&av, 3) == NULL, "a closed, still its verdict");
	u_check(hml_av_source(&av, &a) == FI_ADDR_NOTAVAIL,
		"a closed, still a source address");
	u_check(hml_av_target(&av, FI_ADDR_NOTAVAIL) == NULL,
		"FI_ADDR_NOTAVAIL is an endpoint");

	/* A scalable endpoint: two bits of the address choose its receive
	 * context; the provider is asked about the address without them. */
	ep_init(&s, &ps, "fi_shm://s");
	s.rx_ctx = ctxs;
	s.rx_ctx_cnt = 3;
	strcpy(names[7], "fi_shm://s");
	av.rx_ctx_bits = 2;
	hml_av_changed(&av);
	u_check(hml_av_target(&av, 7 | 2ULL << 62) == &ctx[2],
		"rx context 2 of s not found");
	n = lookups;
	u_check(hml_av_target(&av, 7 | 1ULL << 62) == &ctx[1],
		"rx context 1 of s not found");
	u_check(lookups == n, "asked again for another rx context");
	u_check(hml_av_target(&av, 7 | 3ULL << 62) == NULL,
		"rx context 3 of s, which has 3, found");

	hml_self_remove(&b);
	hml_self_remove(&s);
	hml_av_cache_fini(&av);
	return u_done("AV verdict cache: asked once, kept, asked again on "
		      "change, forgotten on close, through growth, rx contexts");
}
