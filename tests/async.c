/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Operations in flight (issue 17): N device transfers posted before any
 * completion is read, then each way of learning that they are done. A
 * completion (the initiator's entry, the target's remote CQ data entry, a
 * receive, a counter) may be told only once its bytes are in place: the
 * test reads them at once, without synchronizing, and the CUDA driver
 * double leaves a device copy undone until someone synchronizes with it
 * or queries it, so a completion told early shows old bytes.
 *
 *   write, read, writedata, send   a completion at a time (async.c)
 *   counters                       a count of v: v operations landed
 *   inject                         the source reusable when the call returns
 *   order                          FI_ORDER_WAW and FI_ORDER_RAW kept
 *   sread, trywait                 fi_cq_sread; fi_trywait and the fd
 *   holdback, exit                 a thread that does not read, or ended
 *   close-ep, close-mr             closing with copies in flight
 *   fault                          one copy fails: that operation alone
 *   host                           write to send and order, on host memory
 *                                  through hmemloop
 *   no-sync-off, no-sync           posting waits for no copy (the double's
 *                                  trace), or, HMEMLOOP_ASYNC=0, does
 *   batch, batch-off,              copies go to the driver together: kernel
 *   batch-old-driver,              launches, or batches with
 *   batch-engines                  HMEMLOOP_KERNEL=0; alone where batches
 *                                  are off or the driver older
 *   kernel-bounds                  a copy past its allocation never reaches
 *                                  the kernel
 *   kernel-host                    copies to and from pinned host memory
 *                                  go to the kernel, never into memory
 *                                  registered read-only, nor from memory
 *                                  unregistered since
 *
 * Without hmemloop the first device transfer fails. fault, host, the
 * no-sync, batch and kernel ones run in a process of their own.
 */
#include "async.h"

#define STR(x)		STR_(x)
#define STR_(x)		#x

/* ---- 1. many in flight, a completion at a time -------------------------- */

static void case_write(void)
{
	if (!fx_open(NULL, "fi_write"))
		return;
	window(WRITE, DA, DB, "fi_write");
	fx_close();
}

static void case_read(void)
{
	if (!fx_open(NULL, "fi_read"))
		return;
	window(READ, DB, DA, "fi_read");
	window(READ, DB, HA, "fi_read");
	window(READ, HB, DA, "fi_read");
	fx_close();
}

/* The target's remote CQ data entries, each with its bytes; then the
 * initiator's. */
static void case_writedata(void)
{
	const char *what = named("fi_writedata, target entries", DA, DB);
	bool seen[N] = { false };
	unsigned s;

	if (!fx_open(NULL, what))
		return;
	if (!f.info->domain_attr->cq_data_size) {
		t_case_skip("%s: %s carries no remote CQ data", what, t_prov);
		fx_close();
		return;
	}
	s = fill(DA);
	zero(DB);
	post_all(&a, WRITEDATA, DA, DB, ctx);
	for (int n = 0; n < N; n++) {
		struct fi_cq_tagged_entry e;
		int i;

		next_ok(b.cq, &e, what);
		t_assert(e.flags & FI_REMOTE_CQ_DATA, "%s: an entry without "
			 "FI_REMOTE_CQ_DATA: flags %#llx", what,
			 (unsigned long long) e.flags);
		i = first_seen(e.data < N ? (int) e.data : -1, seen,
			       e.op_context, what);
		check_slot(DB, i, LEN, s + i, what);
	}
	t_assert(t_quiet(b.cq, 1), "%s: more than %d target entries", what, N);
	reap(&a, ctx, DB, s, what);
	t_ok("%s: %d in flight, each one's bytes in place when its remote "
	     "CQ data entry is read", what, N);
	fx_close();
}

/* Which of the N patterns of seeds s + i, not used yet, v holds. */
static int which(const uint8_t *v, unsigned s, bool *used)
{
	for (int i = 0; i < N; i++) {
		if (!used[i] && t_check(v, LEN, s + i)) {
			used[i] = true;
			return i;
		}
	}
	return -1;
}

/* N receives posted, then N sends: at each receive entry, its buffer
 * holds one of the messages (which one the provider's matching says). */
static void case_send(void)
{
	const char *what = named("fi_send, receive entries", DA, DB);
	bool seen[N] = { false }, used[N] = { false };
	uint8_t v[LEN];
	unsigned s;

	if (!fx_open(NULL, what))
		return;
	s = fill(DA);
	zero(DB);
	for (int i = 0; i < N; i++)
		t_post(b.cq, fi_recv(b.ep, (char *) buf[DB] + i * LEN, LEN,
				     mr[DB].desc, FI_ADDR_UNSPEC, &ctx2[i]));
	post_all(&a, SEND, DA, DB, ctx);
	for (int n = 0; n < N; n++) {
		int j = next_op(b.cq, ctx2, seen, what);

		get(v, DB, (size_t) j * LEN, LEN);
		t_assert(which(v, s, used) >= 0, "%s: receive %d completed, "
			 "its buffer holds no message sent", what, j);
	}
	reap(&a, ctx, -1, 0, what);
	t_ok("%s: %d in flight, each receive's bytes in place when its entry "
	     "is read", what, N);
	fx_close();
}

/* ---- 2. counters -------------------------------------------------------- */

/* Wait (bounded) for counters wr and rw (where not NULL) to reach N;
 * whenever they read v, at least v operations' bytes are in b's slots. */
static void count_up(struct fid_cntr *wr, struct fid_cntr *rw, unsigned s,
		     const char *what)
{
	double end = t_now() + t_wait_s();
	uint64_t last = 0, v, w, m;

	do {
		v = fi_cntr_read(wr);
		w = rw ? fi_cntr_read(rw) : 0;
		m = v > w ? v : w;
		t_assert(m <= N, "%s: counters at %llu and %llu, beyond %d",
			 what, (unsigned long long) v, (unsigned long long) w,
			 N);
		if (m > last) {
			uint64_t landed = 0;

			get(tmp, DB, 0, SPAN);
			for (int i = 0; i < N; i++)
				landed += t_check(tmp + i * LEN, LEN, s + i);
			t_assert(landed >= m, "%s: a counter at %llu, only %llu "
				 "operations' bytes in place", what,
				 (unsigned long long) m,
				 (unsigned long long) landed);
			last = m;
		}
		t_assert(t_now() < end, "%s: counters at %llu and %llu after "
			 "%g s, expected %d", what, (unsigned long long) v,
			 (unsigned long long) w, t_wait_s(), N);
	} while (v < N || (rw && w < N));
}

static void cntr_done(struct fid_cntr *k, const char *name, const char *what)
{
	int ret = fi_cntr_wait(k, N, SREAD_MS);

	t_assert(!ret, "%s: fi_cntr_wait(%s, %d) when it reads %d: %d (%s)",
		 what, name, N, N, ret, fi_strerror(-ret));
	t_assert(!fi_cntr_readerr(k), "%s: %s counted errors", what, name);
}

static void case_counters(void)
{
	const char *what = "counters, fi_write device to device";
	bool event;
	unsigned s;

	if (!counted_open(&event, what))
		return;
	s = fill(DA);
	zero(DB);
	post_all(&a, WRITE, DA, DB, ctx);
	count_up(cntrs[0], cntrs[1], s, what);
	cntr_done(cntrs[0], "the FI_WRITE counter", what);
	if (event)
		cntr_done(cntrs[1], "the target's FI_REMOTE_WRITE counter",
			  what);
	reap(&a, ctx, DB, s, what);
	t_ok("%s: %d in flight; at each count, as many operations' bytes "
	     "in place%s", what, N, event ? ", initiator and target" : "");
	fx_close();
}

/* ---- 8. inject ----------------------------------------------------------- */

/* fi_inject_write of a device source, which is overwritten as soon as the
 * call returns: the target holds what the source held at the call. */
static void case_inject(void)
{
	const char *what = "fi_inject_write device to device, source "
			   "overwritten at once";
	struct t_opts ao = { .own_cntr = { FI_WRITE } };
	unsigned s = 0x1e5;
	double end;
	size_t len;

	if (!fx_open(&ao, what))
		return;
	len = f.info->tx_attr->inject_size < LEN ?
	      f.info->tx_attr->inject_size : LEN;
	if (!len) {
		t_case_skip("%s: %s has no inject", what, t_prov);
		fx_close();
		return;
	}
	zero(DB);
	for (int i = 0; i < N; i++) {
		t_fill(tmp, len, s + i);
		put(DA, 0, tmp, len);
		t_post(a.cq, fi_inject_write(a.ep, buf[DA], len, a_to_b,
					     t_raddr(&f, &mr[DB], i * LEN),
					     mr[DB].key));
		t_fill(tmp, len, ~(s + i));
		put(DA, 0, tmp, len);
	}
	end = t_now() + t_wait_s();
	while (fi_cntr_read(a.cntr[0]) < N) {
		t_assert(t_now() < end, "%s: the FI_WRITE counter at %llu of "
			 "%d", what,
			 (unsigned long long) fi_cntr_read(a.cntr[0]), N);
		t_drive(a.cq);
	}
	for (int i = 0; i < N; i++)
		check_slot(DB, i, len, s + i, what);
	t_ok("%s: %d of %zu bytes, each target holding the source's bytes "
	     "at the call", what, N, len);
	fx_close();
}

/* ---- 9. order ------------------------------------------------------------ */

/* With FI_ORDER_WAW and FI_ORDER_RAW: N writes to one range leave the
 * last one's bytes; a read after a write sees the write. */
static void case_order(void)
{
	const char *what = named("FI_ORDER_WAW and FI_ORDER_RAW", DA, DB);
	struct t_opts fo = { .msg_order = FI_ORDER_WAW | FI_ORDER_RAW };
	bool seen[N] = { false }, rseen[N] = { false };
	unsigned s;

	if (!fab_open(&fo, what) || !eps_open(NULL, NULL, false, what))
		return;
	s = fill(DA);
	zero(DB);
	for (int i = 0; i < N; i++)
		post(&a, WRITE, DA, (size_t) i * LEN, DB, 0, &ctx[i], 0);
	reap(&a, ctx, -1, 0, what);
	get(tmp, DB, 0, LEN);
	t_assert(t_check(tmp, LEN, s + N - 1), "%s: after %d writes to one "
		 "range completed, it holds other bytes than the last one's",
		 what, N);
	t_ok("%s: after %d writes to one range, the last one's bytes", what,
	     N);

	s = fill(DA);
	zero(DB);
	zero(DC);
	for (int i = 0; i < N; i++) {
		size_t off = (size_t) i * LEN;

		post(&a, WRITE, DA, off, DB, off, &ctx[i], 0);
		post(&a, READ, DC, off, DB, off, &ctx2[i], 0);
	}
	for (int n = 0; n < 2 * N; n++) {
		struct fi_cq_tagged_entry e;
		int i;

		next_ok(a.cq, &e, what);
		if ((i = op_in(e.op_context, ctx2)) >= 0) {
			first_seen(i, rseen, e.op_context, what);
			check_slot(DC, i, LEN, s + i, what);
		} else {
			first_seen(op_in(e.op_context, ctx), seen,
				   e.op_context, what);
		}
	}
	t_ok("%s: %d reads, each after a write of its range, saw the write",
	     what, N);
	fx_close();
}

/* ---- host memory through hmemloop (a process of its own) ----------------- */

static void child_host(void)
{
	t_host = true;
	case_write();
	case_read();
	case_writedata();
	case_send();
	case_order();
	t_host = false;
}

static const struct t_case cases[] = {
	T_CASE("write", case_write),	/* first: without hmemloop it fails */
	T_CASE("read", case_read),
	T_CASE("writedata", case_writedata),
	T_CASE("send", case_send),
	T_CASE("counters", case_counters),
	T_CASE("sread", case_sread),
	T_CASE("trywait", case_trywait),
	T_CASE("holdback", case_holdback),
	T_CASE("close-ep", case_close_ep),
	T_CASE("close-mr", case_close_mr),
	T_CASE("inject", case_inject),
	T_CASE("order", case_order),
	T_CASE("exit", case_exit),
	T_FRESH("fault", child_fault, T_NEED_DOUBLE,
		"CUDA_DOUBLE_FAIL_COPY=" STR(FAIL_AT)),
	T_FRESH("host", child_host, T_NEED_SHIM),
	T_FRESH("no-sync-off", child_no_sync, T_NEED_DOUBLE | T_NEED_SHIM,
		"CUDA_DOUBLE_TRACE=1", "HMEMLOOP_ASYNC=0"),
	T_FRESH("no-sync", child_no_sync, T_NEED_DOUBLE, "CUDA_DOUBLE_TRACE=1"),
	T_FRESH("batch", child_batch, T_NEED_DOUBLE | T_NEED_SHIM,
		"CUDA_DOUBLE_TRACE=1"),
	T_FRESH("batch-off", child_batch, T_NEED_DOUBLE | T_NEED_SHIM,
		"CUDA_DOUBLE_TRACE=1", "HMEMLOOP_BATCH=0"),
	T_FRESH("batch-old-driver", child_batch, T_NEED_DOUBLE | T_NEED_SHIM,
		"CUDA_DOUBLE_TRACE=1", "CUDA_DOUBLE_VERSION=12080"),
	T_FRESH("batch-engines", child_batch, T_NEED_DOUBLE | T_NEED_SHIM,
		"CUDA_DOUBLE_TRACE=1", "HMEMLOOP_KERNEL=0"),
	T_FRESH("kernel-bounds", child_kernel_bounds,
		T_NEED_DOUBLE | T_NEED_SHIM),
	T_FRESH("kernel-host", child_kernel_host, T_NEED_SHIM,
		"CUDA_DOUBLE_TRACE=1"),
};

T_MAIN(cases, .flags = T_CUDA, .setup = fx_setup);
