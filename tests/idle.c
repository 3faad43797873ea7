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
 */
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hmltest.h"

#define TIMEOUT_MS 300

static const struct {
	enum fi_wait_obj obj;
	const char *name;
} waits[] = {
	{ FI_WAIT_UNSPEC, "unspec" },
	{ FI_WAIT_FD, "fd" },
	{ FI_WAIT_MUTEX_COND, "mutex_cond" },
	{ FI_WAIT_YIELD, "yield" },
};

/* The provider name that offers this endpoint type: a utility provider
 * layered over a core one (tcp;ofi_rxm) offers FI_EP_MSG through the core
 * alone. */
static char *prov_for(enum fi_ep_type type)
{
	return type == FI_EP_MSG ? t_core_prov() : strdup(t_prov);
}

/* Open a domain of this type, or say it has none. */
static bool open_type(struct t_fabric *f, enum fi_ep_type type)
{
	struct fi_info *h = fi_allocinfo();

	h->caps = FI_MSG;
	h->ep_attr->type = type;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				  FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->fabric_attr->prov_name = prov_for(type);
	return t_open_hints(f, h) == 0;
}

static void idle(struct t_fabric *f, const char *type, int w, bool from)
{
	struct fi_cq_attr attr = {
		.format = FI_CQ_FORMAT_TAGGED,
		.wait_obj = waits[w].obj,
	};
	struct fi_cq_tagged_entry ent;
	bool msg = f->info->ep_attr->type == FI_EP_MSG;
	fi_addr_t src;
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_eq *eq = NULL;
	struct fid_av *av = NULL;
	double start, took;
	ssize_t ret;

	ret = fi_cq_open(f->domain, &attr, &cq, NULL);
	if (ret) {
		printf("digest: %s %s cq_open %zd\n", type, waits[w].name, ret);
		return;
	}
	t_fi(fi_endpoint(f->domain, f->info, &ep, NULL));
	t_fi(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	if (msg) {
		t_fi(fi_eq_open(f->fabric, &eq_attr, &eq, NULL));
		t_fi(fi_ep_bind(ep, &eq->fid, 0));
	} else {
		t_fi(fi_av_open(f->domain, &av_attr, &av, NULL));
		t_fi(fi_ep_bind(ep, &av->fid, 0));
	}
	/* Enabled, as applications do: shm crashes in an sread on a CQ of
	 * an endpoint never enabled. */
	t_fi(fi_enable(ep));
	start = t_now();
	ret = from ? fi_cq_sreadfrom(cq, &ent, 1, &src, NULL, TIMEOUT_MS) :
		     fi_cq_sread(cq, &ent, 1, NULL, TIMEOUT_MS);
	took = (t_now() - start) * 1000;
	printf("digest: %s %s %s %zd\n", type, waits[w].name,
	       from ? "sreadfrom" : "sread", ret);
	t_assert(ret == -FI_EAGAIN, "%s %s: an idle sread returned %zd",
		 type, waits[w].name, ret);
	/* Loose bounds: what matters is that it ends, and not at once. */
	t_assert(took >= TIMEOUT_MS / 2 && took < 20 * TIMEOUT_MS,
		 "%s %s: an idle sread of %d ms took %.0f ms", type,
		 waits[w].name, TIMEOUT_MS, took);
	t_fi(fi_close(&ep->fid));
	t_fi(fi_close(msg ? &eq->fid : &av->fid));
	t_fi(fi_close(&cq->fid));
}

/* One sread in a child of its own, so that a provider that never returns
 * from it (shm 1.17 with some wait objects) is recorded, not waited for:
 * hmemloop must then do the same. */
static void one(enum fi_ep_type type, const char *name, int w, bool from)
{
	struct t_fabric f;
	double end;
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork();
	t_assert(pid >= 0, "fork failed");
	if (!pid) {
		if (!open_type(&f, type)) {
			printf("digest: %s none\n", name);
			exit(0);
		}
		idle(&f, name, w, from);
		t_close(&f);
		exit(0);
	}
	for (end = t_now() + 20 * TIMEOUT_MS / 1000.0; t_now() < end;) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			t_assert(WIFEXITED(st) && !WEXITSTATUS(st),
				 "%s %s: the child failed (status %#x)", name,
				 waits[w].name, st);
			return;
		}
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	printf("digest: %s %s %s never returns\n", name, waits[w].name,
	       from ? "sreadfrom" : "sread");
}

int main(int argc, char **argv)
{
	static const struct {
		enum fi_ep_type type;
		const char *name;
	} types[] = { { FI_EP_RDM, "rdm" }, { FI_EP_MSG, "msg" } };

	t_init(argc, argv, NULL);
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		for (size_t w = 0; w < sizeof(waits) / sizeof(waits[0]); w++) {
			one(types[t].type, types[t].name, w, false);
			one(types[t].type, types[t].name, w, true);
		}
	}
	t_ok("idle sreads end as the provider's do");
	return 0;
}
