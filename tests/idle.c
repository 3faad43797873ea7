/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * An idle fi_cq_sread and fi_cq_sreadfrom end at their timeout with
 * -FI_EAGAIN, on every wait object the provider offers, for reliable
 * (FI_EP_RDM) and connected (FI_EP_MSG) endpoints alike. Nothing here is
 * same-process traffic: hmemloop must behave as the provider alone, so the
 * harness compares the "digest:" lines of runs with and without it.
 * Through util providers, whose sread reads the CQ through its own ops,
 * a wrapper that forwarded to another op than its own once looped for
 * ever here.
 *
 * Each sread runs in a process of its own (a case TYPE-WAIT-CALL), so
 * that a provider that never returns from it (shm 1.17 with some wait
 * objects) is recorded, not waited for: hmemloop must then do the same.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "hmltest.h"

#define TIMEOUT_MS 300

/* A case's arg: its wait object, endpoint type and call; a digest names
 * them by the case's name, TYPE-WAIT-CALL. */
#define MSG	(1 << 4)
#define FROM	(1 << 3)
#define WAIT(a)	((a) & 7)

static void idle(void)
{
	int arg = t_arg();
	const char *name = t_case_name();
	/* A utility provider layered over a core one (tcp;ofi_rxm) offers
	 * FI_EP_MSG through the core alone. */
	char *prov = arg & MSG ? t_core_prov() : NULL;
	struct t_opts o = {
		.prov = prov,
		.caps = FI_MSG,
		.type = arg & MSG ? FI_EP_MSG : FI_EP_RDM,
		.cq_wait = WAIT(arg),
	};
	struct fi_cq_tagged_entry ent;
	struct t_fabric f;
	const char *what;
	double start, took;
	struct t_ep e;
	fi_addr_t src;
	ssize_t ret;

	if (t_try_open(&f, &o)) {
		printf("digest: %s none\n", name);
		free(prov);
		return;
	}
	free(prov);
	/* Enabled, as applications do: shm crashes in an sread on a CQ of
	 * an endpoint never enabled. */
	ret = t_ep_try_open(&e, &f, &o, &what);
	if (ret && !strcmp(what, "fi_cq_open")) {
		printf("digest: %s cq_open %zd\n", name, ret);
		t_close(&f);
		return;
	}
	t_assert(!ret, "%s: %s: %zd", name, what, ret);
	start = t_now();
	ret = arg & FROM ?
	      fi_cq_sreadfrom(e.cq, &ent, 1, &src, NULL, TIMEOUT_MS) :
	      fi_cq_sread(e.cq, &ent, 1, NULL, TIMEOUT_MS);
	took = (t_now() - start) * 1000;
	printf("digest: %s %zd\n", name, ret);
	t_assert(ret == -FI_EAGAIN, "%s: an idle sread returned %zd", name,
		 ret);
	/* Loose bounds: what matters is that it ends, and not at once. */
	t_assert(took >= TIMEOUT_MS / 2 && took < 20 * TIMEOUT_MS,
		 "%s: an idle sread of %d ms took %.0f ms", name, TIMEOUT_MS,
		 took);
	t_ep_close(&e);
	t_close(&f);
}

/* A process that never returned is recorded; one that ended must have
 * ended well. */
static void recorded(const struct t_case *c, int st)
{
	if (st == T_TIMED_OUT) {
		printf("digest: %s never returns\n", c->name);
		return;
	}
	t_assert(WIFEXITED(st) && !WEXITSTATUS(st),
		 "%s: the child failed (status %#x)", c->name, st);
}

#define IDLE(n, a) { .name = (n), .run = idle, .arg = (a), .fresh = true, \
		     .limit_s = 20 * TIMEOUT_MS / 1000.0, .check = recorded }

static const struct t_case cases[] = {
	IDLE("rdm-unspec-sread", FI_WAIT_UNSPEC),
	IDLE("rdm-unspec-sreadfrom", FI_WAIT_UNSPEC | FROM),
	IDLE("rdm-fd-sread", FI_WAIT_FD),
	IDLE("rdm-fd-sreadfrom", FI_WAIT_FD | FROM),
	IDLE("rdm-mutex_cond-sread", FI_WAIT_MUTEX_COND),
	IDLE("rdm-mutex_cond-sreadfrom", FI_WAIT_MUTEX_COND | FROM),
	IDLE("rdm-yield-sread", FI_WAIT_YIELD),
	IDLE("rdm-yield-sreadfrom", FI_WAIT_YIELD | FROM),
	IDLE("msg-unspec-sread", MSG | FI_WAIT_UNSPEC),
	IDLE("msg-unspec-sreadfrom", MSG | FI_WAIT_UNSPEC | FROM),
	IDLE("msg-fd-sread", MSG | FI_WAIT_FD),
	IDLE("msg-fd-sreadfrom", MSG | FI_WAIT_FD | FROM),
	IDLE("msg-mutex_cond-sread", MSG | FI_WAIT_MUTEX_COND),
	IDLE("msg-mutex_cond-sreadfrom", MSG | FI_WAIT_MUTEX_COND | FROM),
	IDLE("msg-yield-sread", MSG | FI_WAIT_YIELD),
	IDLE("msg-yield-sreadfrom", MSG | FI_WAIT_YIELD | FROM),
};

static void all_done(void)
{
	t_ok("idle sreads end as the provider's do");
}

T_MAIN(cases, .teardown = all_done);
