/* SPDX-License-Identifier: BSD-2-Clause */
/* The async test's fixture: a fabric, endpoints and registered buffers of
 * N slots; filling and checking slots; operations posted and reaped. */
#include "async.h"

struct t_fabric f;
struct t_ep a, b, c;
fi_addr_t a_to_b, c_to_b;
void *buf[NB];
struct t_mr mr[NB];
struct fid_cntr *cntrs[2];
int ctx[N], ctx2[N];
uint8_t tmp[SPAN];
unsigned long copies;
CUcontext cu_ctx;

bool is_dev(int n)
{
	return n < HA && !t_host;
}

/* "what, device to host": from buffer src to dst (a static buffer). */
const char *named(const char *what, int src, int dst)
{
	static char s[128];

	snprintf(s, sizeof(s), "%s, %s to %s", what,
		 is_dev(src) ? "device" : "host",
		 is_dev(dst) ? "device" : "host");
	return s;
}

/* ---- the fixture -------------------------------------------------------- */

/* Device 0's primary context (cu_ctx), made current by T_CUDA. */
void fx_setup(void)
{
	CUdevice dev;

	t_cu(cuDeviceGet(&dev, 0));
	t_cu(cuDevicePrimaryCtxRetain(&cu_ctx, dev));
}

/* A fabric with o's hints and the buffers registered; false (said why) if
 * the provider has none. */
bool fab_open(const struct t_opts *o, const char *what)
{
	const uint64_t all = FI_READ | FI_WRITE | FI_REMOTE_READ |
			     FI_REMOTE_WRITE | FI_SEND | FI_RECV;

	if (t_try_open(&f, o)) {
		t_case_skip("%s: %s gives no domain with what the case needs",
			    what, t_prov);
		return false;
	}
	for (int n = 0; n < NB; n++) {
		buf[n] = is_dev(n) ? t_mem_alloc(SPAN) :
				     aligned_alloc(4096, SPAN);
		t_assert(buf[n], "out of memory");
		t_reg(&f, buf[n], SPAN, all, n + 1, &mr[n]);
	}
	return true;
}

void fx_close(void)
{
	struct t_ep *e[3] = { &a, &b, &c };

	for (int i = 0; i < 3; i++)
		if (e[i]->ep)
			t_ep_close(e[i]);
	for (int i = 0; i < 2; i++)
		if (cntrs[i])
			t_fi(fi_close(&cntrs[i]->fid));
	for (int n = 0; n < NB; n++) {
		if (mr[n].mr)
			t_fi(fi_close(&mr[n].mr->fid));
		if (buf[n] && is_dev(n))
			t_mem_free(buf[n]);
		else
			free(buf[n]);
	}
	t_close(&f);
	memset(buf, 0, sizeof(buf));
	memset(mr, 0, sizeof(mr));
	memset(cntrs, 0, sizeof(cntrs));
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&c, 0, sizeof(c));
}

/* Endpoints a (with ao) and b (with bo), and c where three; false (said
 * why) if the provider refuses a CQ the options ask for. */
bool eps_open(const struct t_opts *ao, const struct t_opts *bo,
	      bool three, const char *what)
{
	struct t_ep *e[3] = { &a, &b, &c };
	const struct t_opts *o[3] = { ao, bo, NULL };
	const char *call;

	for (int i = 0; i < 2 + three; i++) {
		int ret = t_ep_try_open(e[i], &f, o[i], &call);

		if (ret && !strcmp(call, "fi_cq_open")) {
			t_case_skip("%s: %s has no such CQ: fi_cq_open: %s",
				    what, t_prov, fi_strerror(-ret));
			fx_close();
			return false;
		}
		t_assert(!ret, "%s: %s: %d (%s)", what, call, ret,
			 fi_strerror(-ret));
	}
	a_to_b = t_insert(&a, b.name);
	if (three)
		c_to_b = t_insert(&c, b.name);
	return true;
}

/* The fabric and endpoints a and b with what o asks of a's. */
bool fx_open(const struct t_opts *ao, const char *what)
{
	return fab_open(NULL, what) && eps_open(ao, NULL, false, what);
}

/* The fixture with a's completions counted (cntrs[0], FI_WRITE) and,
 * where the provider counts them (*event), b's (cntrs[1],
 * FI_REMOTE_WRITE). */
bool counted_open(bool *event, const char *what)
{
	struct t_opts fo = { .caps = FI_MSG | FI_TAGGED | FI_RMA |
				     FI_RMA_EVENT };
	struct t_opts ao = { .cntr_flags = FI_WRITE };
	struct t_opts bo = { .cntr_flags = FI_REMOTE_WRITE };

	*event = !t_try_open(&f, &fo);
	if (*event)
		t_close(&f);
	else
		printf("note: %s has no FI_RMA_EVENT: the target's counter is "
		       "not checked\n", t_prov);
	if (!fab_open(*event ? &fo : NULL, what))
		return false;
	cntrs[0] = t_cntr_open(&f, FI_WAIT_UNSPEC);
	ao.cntr = cntrs[0];
	if (*event) {
		cntrs[1] = t_cntr_open(&f, FI_WAIT_UNSPEC);
		bo.cntr = cntrs[1];
	}
	return eps_open(&ao, &bo, false, what);
}

/* ---- bytes -------------------------------------------------------------- */

void put(int n, size_t off, const void *p, size_t len)
{
	if (is_dev(n)) {
		copies++;
		t_dev_put((char *) buf[n] + off, p, len);
	} else {
		memcpy((char *) buf[n] + off, p, len);
	}
}

/* No synchronization: a copy still in flight shows as old bytes. */
void get(void *p, int n, size_t off, size_t len)
{
	if (is_dev(n)) {
		copies++;
		t_dev_get(p, (char *) buf[n] + off, len);
	} else {
		memcpy(p, (char *) buf[n] + off, len);
	}
}

/* Slot i of buffer n gets the pattern of seed s + i; s is returned, new
 * each time, so that bytes of an earlier case never pass. */
unsigned fill(int n)
{
	static unsigned next = 0x5eed;
	unsigned s = next += 0x1000;

	for (int i = 0; i < N; i++)
		t_fill(tmp + i * LEN, LEN, s + i);
	put(n, 0, tmp, SPAN);
	return s;
}

void zero(int n)
{
	memset(tmp, 0, SPAN);
	put(n, 0, tmp, SPAN);
}

void check_slot(int n, int i, size_t len, unsigned s, const char *what)
{
	uint8_t v[LEN];

	get(v, n, (size_t) i * LEN, len);
	t_assert(t_check(v, len, s), "%s: operation %d completed, its bytes "
		 "are not in place yet", what, i);
}

/* ---- operations --------------------------------------------------------- */

/* One operation from e between byte loff of buffer lb and roff of rb (the
 * target's; a send goes to b's next receive). */
void post(struct t_ep *e, enum op k, int lb, size_t loff, int rb,
	  size_t roff, void *context, uint64_t data)
{
	void *l = (char *) buf[lb] + loff;
	uint64_t ra = t_raddr(&f, &mr[rb], roff), key = mr[rb].key;
	fi_addr_t to = e == &c ? c_to_b : a_to_b;
	void *desc = mr[lb].desc;

	switch (k) {
	case WRITE:
		t_post(e->cq, fi_write(e->ep, l, LEN, desc, to, ra, key,
				       context));
		break;
	case READ:
		t_post(e->cq, fi_read(e->ep, l, LEN, desc, to, ra, key,
				      context));
		break;
	case WRITEDATA:
		t_post(e->cq, fi_writedata(e->ep, l, LEN, desc, data, to, ra,
					   key, context));
		break;
	case SEND:
		t_post(e->cq, fi_send(e->ep, l, LEN, desc, to, context));
		break;
	}
}

/* N operations, operation i between slot i of lb and slot i of rb, with
 * context ctxs + i and data i. */
void post_all(struct t_ep *e, enum op k, int lb, int rb, int *ctxs)
{
	for (int i = 0; i < N; i++)
		post(e, k, lb, (size_t) i * LEN, rb, (size_t) i * LEN,
		     &ctxs[i], (uint64_t) i);
}

/* The fixture with a's options ao (may be NULL), and N writes from a's
 * slots of device A into b's of device B, in flight; *s their seed. */
bool writes_in_flight(const struct t_opts *ao, const char *what,
		      unsigned *s)
{
	if (!fx_open(ao, what))
		return false;
	*s = fill(DA);
	zero(DB);
	post_all(&a, WRITE, DA, DB, ctx);
	return true;
}

/* The next entry of cq: a success. */
void next_ok(struct fid_cq *cq, struct fi_cq_tagged_entry *e,
	     const char *what)
{
	struct fi_cq_err_entry err;
	int ret = t_wait(cq, e, &err);

	t_assert(ret >= 0, "%s: a completion did not come within %g s", what,
		 t_wait_s());
	t_assert(!ret, "%s: error completion: %d (%s), context %p", what,
		 err.err, fi_strerror(err.err), err.op_context);
}

/* Which of ctxs[0..N) context is, or -1. */
int op_in(const void *context, const int *ctxs)
{
	const int *p = context;

	return p >= ctxs && p < ctxs + N ? (int) (p - ctxs) : -1;
}

/* Operation i of ctxs, seen for the first time. */
int first_seen(int i, bool *seen, const void *context,
	       const char *what)
{
	t_assert(i >= 0 && i < N && !seen[i], "%s: an entry of context %p: "
		 "not an operation in flight, or one completed already", what,
		 context);
	seen[i] = true;
	return i;
}

/* The next success of cq, of one of ctxs' operations: which. */
int next_op(struct fid_cq *cq, const int *ctxs, bool *seen,
	    const char *what)
{
	struct fi_cq_tagged_entry e;

	next_ok(cq, &e, what);
	return first_seen(op_in(e.op_context, ctxs), seen, e.op_context,
			  what);
}

/* N entries of e's operations (ctxs); at each, slot i of dst holds seed
 * s + i, where dst >= 0. Then no more. */
void reap(struct t_ep *e, const int *ctxs, int dst, unsigned s,
	  const char *what)
{
	bool seen[N] = { false };

	for (int n = 0; n < N; n++) {
		int i = next_op(e->cq, ctxs, seen, what);

		if (dst >= 0)
			check_slot(dst, i, LEN, s + i, what);
	}
	t_assert(t_quiet(e->cq, 1), "%s: more than %d completions", what, N);
}

/* N operations of kind k from a, between slots of lb (a's) and rb (b's),
 * all posted before any completion is read; at each, its bytes. */
void window(enum op k, int lb, int rb, const char *call)
{
	int src = k == READ ? rb : lb, dst = k == READ ? lb : rb;
	const char *what = named(call, src, dst);
	unsigned s = fill(src);

	zero(dst);
	post_all(&a, k, lb, rb, ctx);
	reap(&a, ctx, dst, s, what);
	t_ok("%s: %d in flight, each one's bytes in place when its "
	     "completion is read", what, N);
}

/* ---- another thread that posts ------------------------------------------ */

static void *poster_run(void *arg)
{
	struct poster *p = arg;

	t_cu(cuCtxSetCurrent(cu_ctx));
	usleep(p->delay);
	post_all(p->e, WRITE, DA, DB, p->ctxs);
	return NULL;
}

/* Another thread posts N writes from a into b, after delay us. */
unsigned poster_start(struct poster *p, useconds_t delay)
{
	unsigned s = fill(DA);

	zero(DB);
	*p = (struct poster) { .e = &a, .ctxs = ctx, .delay = delay };
	t_assert(!pthread_create(&p->th, NULL, poster_run, p),
		 "pthread_create");
	return s;
}

void poster_join(struct poster *p)
{
	t_assert(!pthread_join(p->th, NULL), "pthread_join");
}
