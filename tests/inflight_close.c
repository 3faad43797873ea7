/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Closing in other orders than the application's usual, with writes in
 * flight (the inflight test, inflight.c): each order runs on host memory,
 * where the provider alone does the writes, then on device memory through
 * hmemloop; each fi_close must answer the same. What a close refuses
 * (-FI_EBUSY: something is bound to it) is closed again at the end.
 */
#include "async.h"

/* What each word of an order closes (fid is each object's first
 * member). */
static struct fid **named_fid(const char *w)
{
	static struct fid *none;

	if (!strcmp(w, "cq"))
		return (struct fid **) &a.cq;
	if (!strcmp(w, "target-cq"))
		return (struct fid **) &b.cq;
	if (!strcmp(w, "cntr"))
		return (struct fid **) &cntrs[0];
	if (!strcmp(w, "src-mr"))
		return (struct fid **) &mr[DA].mr;
	if (!strcmp(w, "dst-mr"))
		return (struct fid **) &mr[DB].mr;
	if (!strcmp(w, "ep"))
		return (struct fid **) &a.ep;
	if (!strcmp(w, "target-ep"))
		return (struct fid **) &b.ep;
	if (!strcmp(w, "av"))
		return (struct fid **) &a.av;
	if (!strcmp(w, "domain"))
		return (struct fid **) &f.domain;
	t_fail("test bug: no object %s", w);
	return &none;
}

/* Close one, if open; its answer appended to out. */
static void close_one(struct fid **p, const char *w, char *out, size_t size)
{
	int ret;

	if (!*p)
		return;
	ret = fi_close(*p);
	snprintf(out + strlen(out), size - strlen(out), " %s:%d", w, ret);
	if (ret)
		return;
	t_unprogress((struct fid_cq *) *p);
	*p = NULL;
}

/* Whatever is left, in the usual order. */
static void close_rest(char *out, size_t size)
{
	static const char *const rest[] = { "ep", "target-ep", "av", "cq",
					    "target-cq", "cntr" };

	t_unprogress(a.cq);
	t_unprogress(b.cq);
	for (size_t i = 0; i < sizeof(rest) / sizeof(rest[0]); i++)
		close_one(named_fid(rest[i]), rest[i], out, size);
	if (b.av)
		t_fi(fi_close(&b.av->fid));
	for (int n = 0; n < NB; n++) {
		if (mr[n].mr)
			close_one((struct fid **) &mr[n].mr, "mr", out, size);
		if (buf[n] && is_dev(n))
			t_mem_free(buf[n]);
		else
			free(buf[n]);
	}
	close_one((struct fid **) &f.domain, "domain", out, size);
	t_fi(fi_close(&f.fabric->fid));
	fi_freeinfo(f.info);
	memset(buf, 0, sizeof(buf));
	memset(mr, 0, sizeof(mr));
	memset(cntrs, 0, sizeof(cntrs));
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
}

/* N writes with remote CQ data (where the provider carries it) from a,
 * counted, then the words of order closed: the answers, into out. */
static bool run_order(const char *order, char *out, size_t size)
{
	struct t_opts ao = { .cntr_flags = FI_WRITE };
	char words[128], *w, *save;

	*out = 0;
	if (!fab_open(NULL, order))
		return false;
	cntrs[0] = t_cntr_open(&f, FI_WAIT_NONE);
	ao.cntr = cntrs[0];
	if (!eps_open(&ao, NULL, false, order))
		return false;
	fill(DA);
	zero(DB);
	for (int i = 0; i < N; i++)
		post(&a, f.info->domain_attr->cq_data_size ? WRITEDATA : WRITE,
		     DA, (size_t) i * LEN, DB, (size_t) i * LEN, &ctx[i], i);
	snprintf(words, sizeof(words), "%s", order);
	for (w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save))
		close_one(named_fid(w), w, out, size);
	snprintf(out + strlen(out), size - strlen(out), " |");
	close_rest(out, size);
	return true;
}

/* The orders, and whether one of its closes is refused where an object
 * is still bound: tcp;ofi_rxm frees the CQ or domain it refuses to close
 * (-FI_EBUSY), and the close that follows frees it again; so does shm of
 * libfabric 2.x with its CUDA IPC cache, on a GPU, with the domain (it
 * destroys the cache before it is refused: glibc's double free, on host
 * memory alone, libfabric 2.6 on the H200). */
static const struct {
	const char *order;
	bool refused;
} orders[] = {
	{ "cq", true }, { "cntr", false }, { "src-mr", false },
	{ "dst-mr", false }, { "av", false }, { "domain", true },
	{ "target-ep target-cq", false }, { "target-cq", true },
	{ "cq cntr src-mr dst-mr", true }, { "ep cq", false },
	{ "ep domain", true }, { "target-ep dst-mr ep", false },
};

/* Does the provider free what order's refused close refuses? */
static bool frees_refused(const char *order)
{
	return strstr(t_prov, "ofi_rxm") ||
	       (!strcmp(t_prov, "shm") && strstr(order, "domain") &&
		FI_MAJOR(fi_version()) >= 2 && !t_cuda_double());
}

void case_close_orders(void)
{
	char host[512], dev[512];

	for (size_t i = 0; i < sizeof(orders) / sizeof(orders[0]); i++) {
		const char *order = orders[i].order;

		if (orders[i].refused && frees_refused(order)) {
			printf("note: closing %s first: %s frees what it "
			       "refuses to close, not tested\n", order, t_prov);
			continue;
		}
		t_host = true;
		if (!run_order(order, host, sizeof(host))) {
			t_host = false;
			continue;
		}
		t_host = false;
		t_assert(run_order(order, dev, sizeof(dev)), "%s: the "
			 "provider opened it on host memory only", order);
		t_assert(!strcmp(host, dev), "closing %s first with writes "
			 "in flight: fi_close answered%s; the provider on host "
			 "memory%s", order, dev, host);
		t_ok("closing %s first with writes in flight:%s, as the "
		     "provider on host memory", order, dev);
	}
}
