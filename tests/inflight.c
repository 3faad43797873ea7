/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Operations in flight where an application does the unusual (issue 17),
 * with the async test's fixture (async_fx.c): each device transfer's copy
 * is still queued on the CUDA driver double when the next call comes.
 *
 *   fork, fork-host      fork() with copies in flight: the parent's complete
 *                        with their bytes; the child runs a fabric of its own
 *   fork-trace           and calls no driver function but pointer queries
 *   close-orders         closing objects in twelve orders with writes in
 *                        flight, each answer the provider's (inflight_close.c)
 *   many                 more than the shim keeps in flight (4096) on a CQ
 *                        nobody reads, a counter's fi_cntr_wait sees them all
 *   many-cq, full        as many on a CQ that holds them, or of 64 read only
 *                        when a post says -FI_EAGAIN: each entry once
 *   undrained            fi_cntr_wait at once, the CQ never read, initiator
 *                        and target
 *   formats              each CQ format, fi_cq_read, fi_cq_readfrom and
 *                        fi_cq_sreadfrom: the entries are those the provider
 *                        gives on host memory
 *   query-fault(-sticky) the driver fails a query after the copies were
 *                        queued (once, or from then on): an error entry, the
 *                        others' bytes, nothing outside
 *   query-fault-msg(-sticky)  as many, sends and writedata: a failed send's
 *                        receive fails too, a failed write's target is not told
 *
 * Without hmemloop the first device transfer fails.
 */
#include <sys/wait.h>

#include "async.h"

/* ---- fork() ------------------------------------------------------------- */

/* With the double's trace (CUDA_DOUBLE_TRACE), the calls in log other
 * than pointer queries: the child must not use the parent's contexts,
 * streams or copies. The first such is printed. */
static int driver_calls(FILE *log)
{
	static const char call[] = "cuda-double: cu";
	char line[256];
	int n = 0;

	rewind(log);
	while (fgets(line, sizeof(line), log)) {
		if (strncmp(line, call, strlen(call)) ||
		    !strncmp(line, "cuda-double: cuPointerGetAttribute", 34))
			continue;
		if (!n++)
			printf("the child called the driver: %s", line);
	}
	return n;
}

/* The child: the parent's CQs are not its own to read; a fabric of its
 * own, a write of host memory to itself. */
static void child(void)
{
	static char hb[2 * LEN];
	FILE *log = getenv("CUDA_DOUBLE_TRACE") ? tmpfile() : NULL;
	struct t_fabric g;
	struct t_ep e;
	struct t_mr m;
	int cx;

	if (log)
		dup2(fileno(log), STDERR_FILENO);
	t_unprogress(a.cq);
	t_unprogress(b.cq);
	t_open(&g, NULL);
	t_ep_open(&e, &g, NULL);
	t_fill(hb, LEN, 9);
	t_reg(&g, hb, sizeof(hb), FI_WRITE | FI_REMOTE_WRITE, 0, &m);
	t_post(e.cq, fi_write(e.ep, hb, LEN, m.desc, t_insert(&e, e.name),
			      t_raddr(&g, &m, LEN), m.key, &cx));
	t_expect(e.cq, &cx, FI_WRITE, (size_t) -1);
	fflush(stdout);
	/* No exit handlers: libfabric's would tidy up the parent's objects. */
	_exit(!t_check(hb + LEN, LEN, 9) ? 3 : log && driver_calls(log) ? 4 :
	      0);
}

static void case_fork(void)
{
	const char *what = "fork() with writes in flight";
	unsigned s;
	pid_t pid;
	int st;

	fflush(stdout);
	if (!writes_in_flight(NULL, what, &s))
		return;
	pid = fork();
	t_assert(pid >= 0, "fork");
	if (!pid)
		child();
	reap(&a, ctx, DB, s, what);
	window(WRITE, DA, DB, "fi_write after the fork");
	t_assert(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		 !WEXITSTATUS(st), "%s: the child failed: status %#x", what,
		 st);
	t_ok("%s: the parent's %d completed with their bytes, the child's "
	     "own write landed", what, N);
	fx_close();
}

static void child_fork_host(void)
{
	t_host = true;
	case_fork();
	t_host = false;
}

/* ---- more than the shim keeps in flight; a CQ full -------------------- */

#define MANY	(2 * 4096 + 100)
#define SMALL	(SPAN / MANY & ~7UL)

static char many_ctx[MANY];

/* Small write i, a's slot to b's; while the provider (or hmemloop) says
 * -FI_EAGAIN, room is made: one entry of a's CQ taken where seen is
 * given (those seen counted in *n), else the counter read. */
static void small_write(size_t i, bool *seen, size_t *n, const char *what)
{
	double end = t_now() + t_wait_s();
	ssize_t r;

	while ((r = fi_write(a.ep, (char *) buf[DA] + i * SMALL, SMALL,
			     mr[DA].desc, a_to_b,
			     t_raddr(&f, &mr[DB], i * SMALL), mr[DB].key,
			     &many_ctx[i])) == -FI_EAGAIN) {
		struct fi_cq_tagged_entry e;

		t_assert(t_now() < end, "%s: write %zu: -FI_EAGAIN for %g s",
			 what, i, t_wait_s());
		if (!seen) {
			fi_cntr_read(cntrs[0]);
		} else if (fi_cq_read(a.cq, &e, 1) == 1) {
			size_t k = (char *) e.op_context - many_ctx;

			t_assert(k < i && !seen[k], "%s: an entry of write "
				 "%zu, %zu posted", what, k, i);
			seen[k] = true;
			(*n)++;
		}
		t_drive(b.cq);
	}
	t_assert(!r, "%s: write %zu: %zd (%s)", what, i, r,
		 fi_strerror((int) -r));
}

/* The first n small writes' bytes are in place. */
static void small_landed(size_t n, const char *what)
{
	size_t span = n * SMALL;
	uint8_t *want = malloc(span);

	t_assert(want, "out of memory");
	get(want, DA, 0, span);
	get(tmp, DB, 0, span);
	t_assert(!memcmp(tmp, want, span), "%s: the bytes of %zu writes are "
		 "not all in place", what, n);
	free(want);
}

/* a with its CQ ao's and a counter (cntrs[0], FI_WRITE) that waits. */
static bool many_open(struct t_opts *ao, const char *what)
{
	if (!fab_open(NULL, what))
		return false;
	cntrs[0] = t_cntr_open(&f, FI_WAIT_UNSPEC);
	ao->cntr = cntrs[0];
	ao->cntr_flags = FI_WRITE;
	if (!eps_open(ao, NULL, false, what))
		return false;
	t_unprogress(a.cq);
	fill(DA);
	zero(DB);
	return true;
}

/* MANY writes from a, which reports them to a counter alone
 * (FI_SELECTIVE_COMPLETION): nobody reads its CQ. fi_cntr_wait sees every
 * one, once, and each one's bytes are in place. */
static void case_many(void)
{
	const char *what = "more than 4096 fi_write in flight, a CQ nobody "
			   "reads";
	struct t_opts ao = { .cq_flags = FI_SELECTIVE_COMPLETION };
	double end;
	int ret;

	if (!many_open(&ao, what))
		return;
	for (size_t i = 0; i < MANY; i++)
		small_write(i, NULL, NULL, what);
	ret = fi_cntr_wait(cntrs[0], MANY, SREAD_MS);
	t_assert(!ret, "%s: fi_cntr_wait(%d): %d (%s), the counter at %llu",
		 what, MANY, ret, fi_strerror(-ret),
		 (unsigned long long) fi_cntr_read(cntrs[0]));
	t_assert(!fi_cntr_readerr(cntrs[0]), "%s: errors counted", what);
	small_landed(MANY, what);
	t_assert(t_quiet(a.cq, 1), "%s: an entry on a CQ asked for none",
		 what);
	end = t_now() + 0.2;
	while (t_now() < end)
		t_assert(fi_cntr_read(cntrs[0]) == MANY, "%s: the counter "
			 "went on to %llu", what,
			 (unsigned long long) fi_cntr_read(cntrs[0]));
	t_ok("%s: %d counted once each, their bytes in place", what, MANY);
	fx_close();
}

/* MANY writes on a CQ of size cq, read only when a post says -FI_EAGAIN
 * (a CQ as big as them: never): each entry comes once, none is lost, and
 * at each the write's bytes are in place. */
static void many_entries(size_t cq, const char *what)
{
	struct t_opts ao = { .cq_size = cq };
	static bool seen[MANY];
	size_t n = 0, full = 0;

	if (!many_open(&ao, what))
		return;
	memset(seen, 0, sizeof(seen));
	for (size_t i = 0; i < MANY; i++) {
		size_t before = n;

		small_write(i, seen, &n, what);
		full += n > before;
	}
	while (n < MANY) {
		struct fi_cq_tagged_entry e;
		size_t k;

		next_ok(a.cq, &e, what);
		k = (char *) e.op_context - many_ctx;
		t_assert(k < MANY && !seen[k], "%s: an entry of write %zu, "
			 "again or never posted", what, k);
		seen[k] = true;
		n++;
	}
	t_assert(t_quiet(a.cq, 1), "%s: more than %d entries", what, MANY);
	small_landed(MANY, what);
	t_ok("%s: %d entries, each once (%zu posts found it full)", what, MANY,
	     full);
	fx_close();
}

static void case_many_cq(void)
{
	many_entries(MANY, "more than 4096 fi_write in flight on a CQ that "
		     "holds them all");
}

static void case_full(void)
{
	many_entries(N, "fi_write in flight on a CQ of 64 that fills");
}

/* ---- queues nobody drains ------------------------------------------------ */

/* N writes and N with remote CQ data; fi_cntr_wait at once, on the
 * initiator's counter and, where the provider counts them, the target's:
 * no CQ is read before the counts are there. */
static void case_undrained(void)
{
	const char *what = "fi_cntr_wait, no CQ read";
	bool event;
	unsigned s;
	int ret;

	if (!counted_open(&event, what))
		return;
	t_unprogress(a.cq);
	t_unprogress(b.cq);
	s = fill(DA);
	zero(DB);
	post_all(&a, WRITE, DA, DB, ctx);
	for (int i = 0; i < N; i++)
		post(&a, f.info->domain_attr->cq_data_size ? WRITEDATA : WRITE,
		     DA, (size_t) i * LEN, DB, (size_t) i * LEN, &ctx2[i], i);
	for (int i = 0; i < 1 + event; i++) {
		ret = fi_cntr_wait(cntrs[i], 2 * N, SREAD_MS);
		t_assert(!ret, "%s: fi_cntr_wait(%s, %d): %d (%s), at %llu",
			 what, i ? "target" : "initiator", 2 * N, ret,
			 fi_strerror(-ret),
			 (unsigned long long) fi_cntr_read(cntrs[i]));
	}
	for (int i = 0; i < N; i++)
		check_slot(DB, i, LEN, s + i, what);
	t_progress(b.cq);
	for (int n = 0; n < 2 * N; n++) {
		struct fi_cq_tagged_entry e;

		next_ok(a.cq, &e, what);
		t_assert(op_in(e.op_context, ctx) >= 0 ||
			 op_in(e.op_context, ctx2) >= 0, "%s: an entry of "
			 "context %p", what, e.op_context);
	}
	t_ok("%s: %d writes counted, their bytes in place%s", what, 2 * N,
	     event ? ", initiator and target" : "");
	fx_close();
}

/* ---- CQ formats ---------------------------------------------------------- */

/* An entry as compared: its operation (context i of ctx, N + i of ctx2,
 * -1 none, -2 another), buf as buffer and offset (-1 NULL, -2 another). */
struct entry {
	int side, ctx, bufn;
	size_t off, len;
	uint64_t flags, data, tag;
};

static int ctx_of(const void *p)
{
	int i;

	if (!p)
		return -1;
	if ((i = op_in(p, ctx)) >= 0)
		return i;
	return (i = op_in(p, ctx2)) >= 0 ? N + i : -2;
}

static void buf_of(const void *p, struct entry *e)
{
	e->bufn = p ? -2 : -1;
	for (int n = 0; n < NB && p; n++)
		if ((const char *) p >= (char *) buf[n] &&
		    (const char *) p < (char *) buf[n] + SPAN) {
			e->bufn = n;
			e->off = (const char *) p - (char *) buf[n];
		}
}

/* How entries are read. */
enum rd { BY_READ, BY_READFROM, BY_SREADFROM, NRD };
static const char *const rd_names[] = { "fi_cq_read", "fi_cq_readfrom",
					"fi_cq_sreadfrom" };

/* The next entry of cq, read in format fmt, the way rd says. */
static void take(struct fid_cq *cq, struct fid_cq *other, int fmt,
		 enum rd rd, int side, struct entry *out, const char *what)
{
	struct fi_cq_tagged_entry u;
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	double end = t_now() + t_wait_s();
	ssize_t r;

	for (;;) {
		memset(&u, 0, sizeof(u));
		r = rd == BY_SREADFROM ? fi_cq_sreadfrom(cq, &u, 1, &src, NULL,
						       100) :
		    rd == BY_READFROM ? fi_cq_readfrom(cq, &u, 1, &src) :
				     fi_cq_read(cq, &u, 1);
		if (r == 1)
			break;
		/* sockets' sread answers a signal with -FI_ECANCELED. */
		if (r == -FI_ETIMEDOUT || r == -FI_ECANCELED)
			r = -FI_EAGAIN;
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };

			fi_cq_readerr(cq, &err, 0);
			t_fail("%s: error entry %d (%s)", what, err.err,
			       fi_strerror(err.err));
		}
		t_assert(r == -FI_EAGAIN, "%s: %zd (%s)", what, r,
			 fi_strerror((int) -r));
		t_assert(t_now() < end, "%s: an entry did not come", what);
		t_drive(other);
	}
	memset(out, 0, sizeof(*out));
	out->side = side;
	out->ctx = ctx_of(u.op_context);
	/* No FI_SOURCE asked: the source is undefined (util's CQs leave the
	 * slot's last, 0; hmemloop says FI_ADDR_NOTAVAIL). */
	(void) src;
	if (fmt != FI_CQ_FORMAT_CONTEXT) {
		out->flags = u.flags;
		out->len = u.len;
	}
	if (fmt == FI_CQ_FORMAT_DATA || fmt == FI_CQ_FORMAT_TAGGED) {
		buf_of(u.buf, out);
		out->data = u.data;
	}
	if (fmt == FI_CQ_FORMAT_TAGGED)
		out->tag = u.tag;
	/* What fi_cq(3) leaves undefined, or providers differ in: an
	 * initiator's entry is its context and flags (sockets flags a
	 * writedata's FI_REMOTE_CQ_DATA there too); buf is a multi-receive's
	 * alone, data where FI_REMOTE_CQ_DATA says (sockets gives some
	 * without); remote CQ data is its flag and data (tcp;ofi_rxm's len is
	 * 0 and it has no FI_RMA, 2.1's shm the flag alone: README). */
	if (!(out->flags & FI_MULTI_RECV)) {
		out->bufn = -1;
		out->off = 0;
	}
	if (!(out->flags & FI_REMOTE_CQ_DATA))
		out->data = 0;
	if (!side)
		*out = (struct entry) { .ctx = out->ctx, .bufn = -1,
					.flags = out->flags &
						 ~FI_REMOTE_CQ_DATA };
	else if (out->flags & FI_REMOTE_CQ_DATA)
		*out = (struct entry) { .side = 1, .ctx = out->ctx, .bufn = -1,
					.flags = FI_REMOTE_CQ_DATA,
					.data = out->data };
}

static int by_op(const void *x, const void *y)
{
	const struct entry *p = x, *q = y;

	if (p->side != q->side)
		return p->side - q->side;
	if (p->ctx != q->ctx)
		return p->ctx - q->ctx;
	return memcmp(p, q, sizeof(*p));
}

static const enum op kinds[] = { WRITE, WRITEDATA, SEND, READ };

/* N operations of each kind in turn, device to device (host to host
 * where t_host); a's and b's entries, sorted, into es; how many. */
static int entries(int fmt, enum rd rd, struct entry *es, const char *what)
{
	struct t_opts o = { .cq_format = fmt,
			    .cq_wait = rd == BY_SREADFROM ? FI_WAIT_UNSPEC :
							 FI_WAIT_NONE };
	bool cqdata;
	int n = 0, nb = 0;
	unsigned s;

	if (!fab_open(NULL, what) || !eps_open(&o, &o, false, what))
		return -1;
	cqdata = f.info->domain_attr->cq_data_size;
	s = fill(DA);
	zero(DB);
	zero(DC);
	for (int i = 0; i < N; i++)
		if (kinds[i % 4] == SEND)
			t_post(b.cq, fi_recv(b.ep, (char *) buf[DB] + i * LEN,
					     LEN, mr[DB].desc, FI_ADDR_UNSPEC,
					     &ctx2[i]));
	for (int i = 0; i < N; i++) {
		enum op k = kinds[i % 4];
		size_t off = (size_t) i * LEN;

		if (k == WRITEDATA && !cqdata)
			k = WRITE;
		nb += k == SEND || k == WRITEDATA;
		if (k == READ)
			post(&a, k, DC, off, DA, off, &ctx[i], i);
		else
			post(&a, k, DA, off, DB, off, &ctx[i], i);
	}
	for (int i = 0; i < N; i++)
		take(a.cq, b.cq, fmt, rd, 0, &es[n++], what);
	for (int i = 0; i < nb; i++)
		take(b.cq, a.cq, fmt, rd, 1, &es[n++], what);
	t_assert(t_quiet(a.cq, 1) && t_quiet(b.cq, 1), "%s: more entries "
		 "than operations", what);
	for (int i = 0; i < N; i++)
		check_slot(kinds[i % 4] == READ ? DC : DB, i, LEN, s + i, what);
	fx_close();
	qsort(es, n, sizeof(*es), by_op);
	return n;
}

/* Each format, read, readfrom and sreadfrom: the entries of device
 * transfers through hmemloop are those the provider gives for the same on
 * host memory. */
static void case_formats(void)
{
	static const int fmts[] = { FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG,
				    FI_CQ_FORMAT_DATA, FI_CQ_FORMAT_TAGGED };
	static const char *const names[] = { "context", "msg", "data",
					     "tagged" };
	static struct entry host[2 * N], dev[2 * N];
	char what[128];

	for (int k = 0; k < 4 * NRD; k++) {
		enum rd rd = k % NRD;
		int nh, nd;

		snprintf(what, sizeof(what), "FI_CQ_FORMAT_%s, %s",
			 names[k / NRD], rd_names[rd]);
		t_host = true;
		nh = entries(fmts[k / NRD], rd, host, what);
		t_host = false;
		if (nh < 0)
			continue;
		nd = entries(fmts[k / NRD], rd, dev, what);
		t_assert(nd == nh, "%s: %d entries, the provider %d on host "
			 "memory", what, nd, nh);
		for (int i = 0; i < nd; i++) {
			const struct entry *h = &host[i], *d = &dev[i];

			t_assert(!memcmp(h, d, sizeof(*h)), "%s: %s entry of "
				 "context %d: flags %#llx len %zu buf %d+%zu "
				 "data %#llx tag %#llx; the provider on host "
				 "memory: flags %#llx len %zu buf %d+%zu data "
				 "%#llx tag %#llx", what,
				 d->side ? "target" : "initiator", d->ctx,
				 (unsigned long long) d->flags, d->len,
				 d->bufn, d->off, (unsigned long long) d->data,
				 (unsigned long long) d->tag,
				 (unsigned long long) h->flags, h->len,
				 h->bufn, h->off, (unsigned long long) h->data,
				 (unsigned long long) h->tag);
		}
		t_ok("%s: %d entries of deferred copies, as the provider's on "
		     "host memory", what, nd);
	}
}

/* ---- a query fails (a process of its own) ------------------------------- */

/* N - 1 writes, the driver failing a query while they are in flight (once,
 * or from then on with "N+"): each completes once, a failed one with
 * FI_EIO; the others' bytes are in place, slot N - 1 untouched; the
 * application goes on. */
static void child_query_fault(void)
{
	const char *what = "a query fails with writes in flight";
	const char *env = getenv("CUDA_DOUBLE_FAIL_QUERY");
	bool sticky = env && strchr(env, '+');
	bool seen[N] = { false }, bad[N] = { false };
	uint8_t zeros[LEN] = { 0 };
	int errs = 0;
	unsigned s;

	if (!fx_open(NULL, what))
		return;
	s = fill(DA);
	zero(DB);
	for (int i = 0; i < N - 1; i++)
		post(&a, WRITE, DA, (size_t) i * LEN, DB, (size_t) i * LEN,
		     &ctx[i], 0);
	for (int n = 0; n < N - 1; n++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		int ret = t_wait(a.cq, &e, &err), i;

		t_assert(ret >= 0, "%s: %d of %d completions came", what, n,
			 N - 1);
		if (!ret) {
			first_seen(op_in(e.op_context, ctx), seen,
				   e.op_context, what);
			continue;
		}
		i = first_seen(op_in(err.op_context, ctx), seen,
			       err.op_context, what);
		t_assert(err.err == FI_EIO, "%s: write %d: error %d (%s), "
			 "expected %s", what, i, err.err, fi_strerror(err.err),
			 fi_strerror(FI_EIO));
		bad[i] = true;
		errs++;
	}
	t_assert(errs, "%s: every write succeeded: the fault was lost", what);
	t_assert(t_quiet(a.cq, 1), "%s: more than %d completions", what,
		 N - 1);
	get(tmp, DB, 0, SPAN);
	for (int i = 0; i < N; i++) {
		bool mine = t_check(tmp + i * LEN, LEN, s + i);
		bool none = !memcmp(tmp + i * LEN, zeros, LEN);

		t_assert(i == N - 1 ? none : bad[i] ? mine || none : mine,
			 "%s: slot %d holds other bytes (write %s)", what, i,
			 i == N - 1 ? "none" : bad[i] ? "failed" : "succeeded");
	}
	if (!sticky)
		window(WRITE, DA, DB, "fi_write after the fault");
	t_ok("%s: %d of %d failed (%s), the others' bytes in place, nothing "
	     "outside%s", what, errs, N - 1, fi_strerror(FI_EIO),
	     sticky ? "" : "; then a window of writes");
	fx_close();
}

/* N operations, sends and writes with remote CQ data (plain writes where
 * the provider carries none) in turn, a send first, the driver failing a
 * query while they are in flight: each completes once at a; a failed
 * send's receive completes with FI_EIO too, a failed write's target
 * reports nothing. */
static void child_query_fault_msg(void)
{
	const char *what = "a query fails with sends and writes in flight";
	bool bad[N] = { false }, seen[N] = { false }, rseen[N] = { false };
	int errs = 0, sends_bad = 0, rx_bad = 0, want = N / 2, got = 0;
	bool cqdata;

	if (!fx_open(NULL, what))
		return;
	cqdata = f.info->domain_attr->cq_data_size;
	fill(DA);
	zero(DB);
	for (int i = 0; i < N / 2; i++)
		t_post(b.cq, fi_recv(b.ep, (char *) buf[DB] + i * LEN, LEN,
				     mr[DB].desc, FI_ADDR_UNSPEC, &ctx2[i]));
	for (int i = 0; i < N; i++)
		post(&a, i % 2 ? cqdata ? WRITEDATA : WRITE : SEND, DA,
		     (size_t) i * LEN, DB, (size_t) (N / 2 + i / 2) * LEN,
		     &ctx[i], i);
	for (int n = 0; n < N; n++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		int ret = t_wait(a.cq, &e, &err), i;

		t_assert(ret >= 0, "%s: %d of %d completions came", what, n,
			 N);
		i = first_seen(op_in(ret ? err.op_context : e.op_context, ctx),
			       seen, ret ? err.op_context : e.op_context, what);
		t_assert(!ret || err.err == FI_EIO, "%s: operation %d: error "
			 "%d (%s)", what, i, err.err, fi_strerror(err.err));
		bad[i] = ret;
		errs += ret;
		sends_bad += ret && !(i % 2);
		want += !ret && i % 2 && cqdata;
	}
	t_assert(errs, "%s: every operation succeeded: the fault was lost",
		 what);
	while (got < want) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		int ret = t_wait(b.cq, &e, &err), i;

		t_assert(ret >= 0, "%s: %d of %d target entries came", what,
			 got, want);
		got++;
		if (ret) {
			first_seen(op_in(err.op_context, ctx2), rseen,
				   err.op_context, what);
			t_assert(err.err == FI_EIO, "%s: a receive's error %d "
				 "(%s)", what, err.err, fi_strerror(err.err));
			rx_bad++;
		} else if (e.flags & FI_REMOTE_CQ_DATA) {
			i = (int) e.data;
			t_assert(i >= 0 && i < N && i % 2 && !bad[i],
				 "%s: remote CQ data %d: a failed or no write",
				 what, i);
		} else {
			first_seen(op_in(e.op_context, ctx2), rseen,
				   e.op_context, what);
		}
	}
	t_assert(t_quiet(b.cq, 1), "%s: more than %d target entries", what,
		 want);
	t_assert(rx_bad == sends_bad, "%s: %d sends failed, %d receives",
		 what, sends_bad, rx_bad);
	t_ok("%s: %d of %d failed (%d sends, as many receives), the target "
	     "told of no failed write", what, errs, N, sends_bad);
	fx_close();
}

static const struct t_case cases[] = {
	T_CASE("formats", case_formats),	/* first: fails without */
	T_CASE("fork", case_fork),
	T_CASE("undrained", case_undrained),
	T_CASE("many", case_many),
	T_CASE("many-cq", case_many_cq),
	T_CASE("full", case_full),
	T_CASE("close-orders", case_close_orders),
	T_FRESH("fork-host", child_fork_host, T_NEED_SHIM),
	T_FRESH("fork-trace", case_fork, T_NEED_DOUBLE, "CUDA_DOUBLE_TRACE=1"),
	/* Copies are queried only where they are left in flight. */
	T_FRESH("query-fault", child_query_fault, T_NEED_DOUBLE,
		"CUDA_DOUBLE_FAIL_QUERY=2", "HMEMLOOP_ASYNC=1"),
	T_FRESH("query-fault-sticky", child_query_fault, T_NEED_DOUBLE,
		"CUDA_DOUBLE_FAIL_QUERY=2+", "HMEMLOOP_ASYNC=1"),
	T_FRESH("query-fault-msg", child_query_fault_msg, T_NEED_DOUBLE,
		"CUDA_DOUBLE_FAIL_QUERY=2", "HMEMLOOP_ASYNC=1"),
	T_FRESH("query-fault-msg-sticky", child_query_fault_msg,
		T_NEED_DOUBLE, "CUDA_DOUBLE_FAIL_QUERY=2+", "HMEMLOOP_ASYNC=1"),
};

T_MAIN(cases, .flags = T_CUDA, .setup = fx_setup);
