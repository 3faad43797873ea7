/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Host messages between two RDM endpoints of the process at every
 * threading level, on the provider and, for a layered one (tcp;ofi_rxm),
 * on its core alone. Nothing here is hmemloop's to do: the harness
 * compares the "digest:" lines of runs with and without it. libfabric
 * 2.x's tcp serves FI_THREAD_COMPLETION from a multiplexed domain that it
 * recognises by its op table, and crashed in fi_enable once hmemloop had
 * replaced that table (fabtests' fi_multi_ep --threading completion).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmltest.h"

#define LEN 64

/* The case's level (its arg), on prov. */
static void exchange(const char *prov)
{
	struct t_opts o = {
		.prov = prov,
		.caps = FI_MSG,
		.threading = t_arg(),
	};
	const char *level = t_case_name();
	char sbuf[LEN], rbuf[LEN];
	struct fi_context2 sctx, rctx;
	struct t_fabric f;
	struct t_ep a, b;
	struct t_mr smr, rmr;
	fi_addr_t to_b;

	if (t_try_open(&f, &o)) {
		printf("digest: %s %s none\n", prov, level);
		return;
	}
	t_ep_open(&a, &f, NULL);
	t_ep_open(&b, &f, NULL);
	to_b = t_insert(&a, b.name);
	t_insert(&b, a.name);
	t_fill(sbuf, LEN, t_arg());
	memset(rbuf, 0, LEN);
	t_reg(&f, sbuf, LEN, FI_SEND, 1, &smr);
	t_reg(&f, rbuf, LEN, FI_RECV, 2, &rmr);
	t_post(b.cq, fi_recv(b.ep, rbuf, LEN, rmr.desc, FI_ADDR_UNSPEC,
			     &rctx));
	t_post(a.cq, fi_send(a.ep, sbuf, LEN, smr.desc, to_b, &sctx));
	t_expect(a.cq, &sctx, FI_SEND, (size_t) -1);
	t_expect(b.cq, &rctx, FI_RECV, LEN);
	printf("digest: %s %s crc %08x\n", prov, level, t_crc(rbuf, LEN));
	t_fi(fi_close(&smr.mr->fid));
	t_fi(fi_close(&rmr.mr->fid));
	t_ep_close(&b);
	t_ep_close(&a);
	t_close(&f);
}

/* The level of the case's arg, on the provider and on its core. */
static void level(void)
{
	char *core = t_core_prov();

	exchange(t_prov);
	if (strcmp(core, t_prov))
		exchange(core);
	free(core);
}

/* A digest names the level by its case: 2.x's fi_tostr has no name for
 * FI_THREAD_ENDPOINT. */
static const struct t_case cases[] = {
	{ .name = "safe", .run = level, .arg = FI_THREAD_SAFE },
	{ .name = "domain", .run = level, .arg = FI_THREAD_DOMAIN },
	{ .name = "completion", .run = level, .arg = FI_THREAD_COMPLETION },
	{ .name = "endpoint", .run = level, .arg = FI_THREAD_ENDPOINT },
};

static void all_done(void)
{
	t_ok("host messages at every threading level, as the provider does");
}

T_MAIN(cases, .teardown = all_done);
