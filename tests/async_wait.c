/* SPDX-License-Identifier: BSD-2-Clause */
/* The async test's cases that wait, use threads, close, or fail a copy. */
#include <poll.h>

#include "async.h"

/* ---- 3. fi_cq_sread, 4. fi_trywait and the fd, 10. a thread's exit ------ */

/* fi_cq_sread, one entry at a time, while another thread posts: at
 * each, its bytes. */
static void sread_all(useconds_t delay, const char *what)
{
	double end = t_now() + t_wait_s();
	bool seen[N] = { false };
	struct poster p;
	unsigned s = poster_start(&p, delay);

	for (int n = 0; n < N;) {
		struct fi_cq_tagged_entry e;
		ssize_t ret = fi_cq_sread(a.cq, &e, 1, NULL, SREAD_MS);
		int i;

		/* sockets answers a signal with -FI_ECANCELED: hmemloop's
		 * for an entry this thread took before it slept, too. */
		if (ret == -FI_EAGAIN || ret == -FI_ETIMEDOUT ||
		    ret == -FI_ECANCELED) {
			t_assert(t_now() < end, "%s: %d of %d entries after "
				 "%g s", what, n, N, t_wait_s());
			continue;
		}
		t_assert(ret == 1, "%s: fi_cq_sread: %zd (%s)", what, ret,
			 fi_strerror((int) -ret));
		i = first_seen(op_in(e.op_context, ctx), seen, e.op_context,
			       what);
		check_slot(DB, i, LEN, s + i, what);
		n++;
	}
	poster_join(&p);
	t_ok("%s: %d entries, each one's bytes in place", what, N);
}

void case_sread(void)
{
	struct t_opts ao = { .cq_wait = FI_WAIT_UNSPEC };

	if (!fx_open(&ao, "fi_cq_sread"))
		return;
	sread_all(0, "fi_cq_sread while another thread posts fi_write");
	sread_all(ASLEEP_US, "fi_cq_sread asleep before another thread "
		  "posts fi_write");
	fx_close();
}

/* The loop of fi_poll(3): read until -FI_EAGAIN, fi_trywait, poll the
 * fd. A wake-up lost is a poll that runs out with an entry to read. */
void case_trywait(void)
{
	const char *what = "fi_trywait and poll() on the CQ's fd";
	struct t_opts ao = { .cq_wait = FI_WAIT_FD };
	struct fid *fids[1];
	double end;
	bool seen[N] = { false }, timed_out = false;
	struct poster p;
	int fd, ret, n = 0;
	unsigned s;

	if (!fx_open(&ao, what))
		return;
	ret = fi_control(&a.cq->fid, FI_GETWAIT, &fd);
	if (ret) {
		t_case_skip("%s: %s gives no fd (fi_control FI_GETWAIT: %s)",
			    what, t_prov, fi_strerror(-ret));
		fx_close();
		return;
	}
	fids[0] = &a.cq->fid;
	end = t_now() + t_wait_s();
	s = poster_start(&p, ASLEEP_US);
	while (n < N) {
		struct fi_cq_tagged_entry e;
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ssize_t got = fi_cq_read(a.cq, &e, 1);
		int i;

		if (got == 1) {
			t_assert(!timed_out, "%s: poll() ran out (%d ms) with "
				 "an entry to read: a wake-up lost", what,
				 POLL_MS);
			i = first_seen(op_in(e.op_context, ctx), seen,
				       e.op_context, what);
			check_slot(DB, i, LEN, s + i, what);
			n++;
			continue;
		}
		t_assert(got == -FI_EAGAIN, "%s: fi_cq_read: %zd (%s)", what,
			 got, fi_strerror((int) -got));
		t_assert(t_now() < end, "%s: %d of %d entries after %g s",
			 what, n, N, t_wait_s());
		timed_out = false;
		if (!fi_trywait(f.fabric, fids, 1))
			timed_out = !poll(&pf, 1, POLL_MS);
	}
	poster_join(&p);
	t_ok("%s: %d entries, each one's bytes in place", what, N);
	fx_close();
}

/* A thread posts N and ends; this one reads them. */
void case_exit(void)
{
	const char *what = "completions of a thread that ended";
	struct poster p;
	unsigned s;

	if (!fx_open(NULL, what))
		return;
	s = poster_start(&p, 0);
	poster_join(&p);
	reap(&a, ctx, DB, s, what);
	t_ok("%s: %d, each one's bytes in place", what, N);
	fx_close();
}

/* ---- 5. a thread that never reads ---------------------------------------- */

static pthread_barrier_t bar;

static void *idle_run(void *arg)
{
	unsigned s = *(unsigned *) arg;

	t_cu(cuCtxSetCurrent(cu_ctx));
	post_all(&a, WRITE, DA, DB, ctx);
	pthread_barrier_wait(&bar);
	pthread_barrier_wait(&bar);
	reap(&a, ctx, DB, s, "the idle thread's own writes, read at last");
	return NULL;
}

/* A thread posts N on a and reads nothing until this one, posting N on c,
 * has read all of c's. */
void case_holdback(void)
{
	const char *what = "a thread that does not read holds nothing back";
	pthread_t th;
	unsigned s;

	if (!fab_open(NULL, what) || !eps_open(NULL, NULL, true, what))
		return;
	s = fill(DA);
	zero(DB);
	zero(DC);
	/* No one reads a's CQ while the other thread waits. */
	t_unprogress(a.cq);
	t_assert(!pthread_barrier_init(&bar, NULL, 2), "pthread_barrier_init");
	t_assert(!pthread_create(&th, NULL, idle_run, &s), "pthread_create");
	pthread_barrier_wait(&bar);
	post_all(&c, WRITE, DA, DC, ctx2);
	reap(&c, ctx2, DC, s, what);
	pthread_barrier_wait(&bar);
	t_assert(!pthread_join(th, NULL), "pthread_join");
	pthread_barrier_destroy(&bar);
	t_progress(a.cq);
	t_ok("%s: %d of another endpoint completed while %d of the idle "
	     "thread's were in flight", what, N, N);
	fx_close();
}

/* ---- 6. closing with copies in flight ------------------------------------ */

/* fi_close of the endpoint; then its CQ has all N entries. */
void case_close_ep(void)
{
	const char *what = "fi_close of an endpoint with writes in flight";
	unsigned s;

	if (!writes_in_flight(NULL, what, &s))
		return;
	t_fi(fi_close(&a.ep->fid));
	a.ep = NULL;
	reap(&a, ctx, DB, s, what);
	t_unprogress(a.cq);
	t_fi(fi_close(&a.av->fid));
	t_fi(fi_close(&a.cq->fid));
	memset(&a, 0, sizeof(a));
	t_ok("%s: %d entries after it, each one's bytes in place", what, N);
	fx_close();
}

/* fi_close of the target's region, then its memory freed: the bytes were
 * there when the close returned. */
void case_close_mr(void)
{
	const char *what = "fi_close of the target's region with writes in "
			   "flight, then cuMemFree";
	unsigned s;

	if (!writes_in_flight(NULL, what, &s))
		return;
	t_fi(fi_close(&mr[DB].mr->fid));
	mr[DB].mr = NULL;
	get(tmp, DB, 0, SPAN);
	for (int i = 0; i < N; i++)
		t_assert(t_check(tmp + i * LEN, LEN, s + i), "%s: write %d "
			 "had not landed when fi_close returned", what, i);
	t_mem_free(buf[DB]);
	buf[DB] = NULL;
	reap(&a, ctx, -1, 0, what);
	t_ok("%s: all %d had landed when the close returned", what, N);
	fx_close();
}

/* ---- 7. a copy that fails (a process of its own) ------------------------- */

/* Every entry of the N writes from DA's slots to DB's first (the checks'
 * own copies come after): write bad's is FI_EIO, the others succeed; then
 * bad's slot holds nothing, the others their bytes. */
static void one_failed(int bad, unsigned s, const char *what)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	bool seen[N] = { false }, failed = false;

	for (int n = 0; n < N; n++) {
		int ret = t_wait(a.cq, &e, &err);

		t_assert(ret >= 0, "%s: %d of %d completions came", what, n,
			 N);
		if (ret) {
			t_assert(err.op_context == &ctx[bad] &&
				 err.err == FI_EIO, "%s: error %d (%s) for "
				 "write %d, expected %s for write %d", what,
				 err.err, fi_strerror(err.err),
				 op_in(err.op_context, ctx),
				 fi_strerror(FI_EIO), bad);
			first_seen(bad, seen, err.op_context, what);
			failed = true;
		} else {
			first_seen(op_in(e.op_context, ctx), seen,
				   e.op_context, what);
		}
	}
	t_assert(failed, "%s: write %d succeeded", what, bad);
	get(tmp, DB, 0, SPAN);
	for (int i = 0; i < N; i++) {
		uint8_t zeros[LEN] = { 0 };

		t_assert(i == bad ? !memcmp(tmp + i * LEN, zeros, LEN) :
			 t_check(tmp + i * LEN, LEN, s + i), "%s: write %d's "
			 "bytes are wrong (write %d failed)", what, i, bad);
	}
	t_ok("%s: write %d alone failed (%s) and moved nothing; the %d "
	     "others landed", what, bad, fi_strerror(FI_EIO), N - 1);
}

void child_fault(void)
{
	const char *what = "a copy fails among writes in flight";
	const int bad = FAIL_OP - 1;
	unsigned s;

	if (!fx_open(NULL, what))
		return;
	s = fill(DA);
	zero(DB);
	t_assert(copies <= FAIL_AT - FAIL_OP, "test bug: %lu copies before "
		 "the first write", copies);
	while (copies < FAIL_AT - FAIL_OP)
		put(DC, 0, tmp, 1);
	post_all(&a, WRITE, DA, DB, ctx);
	one_failed(bad, s, what);
	fx_close();
}

/* ---- 11. posting does not wait (a process of its own) -------------------- */

/* The calls of the double's trace (CUDA_DOUBLE_TRACE) in log whose name
 * holds call. */
static int calls_in(FILE *log, const char *call)
{
	char line[256];
	int n = 0;

	rewind(log);
	while (fgets(line, sizeof(line), log))
		n += !strncmp(line, "cuda-double: cu", 15) &&
		     strstr(line, call);
	return n;
}

/* Catch what this process writes on stderr (the double's trace) in a
 * file, until caught(saved). */
static FILE *catch(int *saved)
{
	FILE *log = tmpfile();

	t_assert(log, "tmpfile");
	fflush(stderr);
	*saved = dup(STDERR_FILENO);
	t_assert(*saved >= 0 && dup2(fileno(log), STDERR_FILENO) >= 0,
		 "dup2");
	return log;
}

static void caught(int saved)
{
	t_assert(dup2(saved, STDERR_FILENO) >= 0, "dup2");
	close(saved);
}

/* N writes of DA's slots (seed *s) to DB's posted with stderr caught, to
 * be given back with caught(*saved); NULL where the fixture is not. */
static FILE *post_caught(const char *what, unsigned *s, int *saved)
{
	FILE *log;

	if (!fx_open(NULL, what))
		return NULL;
	*s = fill(DA);
	zero(DB);
	log = catch(saved);
	post_all(&a, WRITE, DA, DB, ctx);
	return log;
}

/* N writes posted with the double's trace on stderr, caught: no call may
 * wait for the device while they are posted (with HMEMLOOP_ASYNC=0, each
 * waits for its copy). */
void child_no_sync(void)
{
	const char *what = "posting fi_write device to device";
	const char *async = getenv("HMEMLOOP_ASYNC");
	bool sync = async && !strcmp(async, "0");
	FILE *log;
	int saved, waits;
	unsigned s;

	if (!(log = post_caught(what, &s, &saved)))
		return;
	caught(saved);
	/* cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize and
	 * their per-thread forms */
	waits = calls_in(log, "Synchronize");
	fclose(log);
	if (sync)
		t_assert(waits, "%s, HMEMLOOP_ASYNC=0: no call waited for the "
			 "device", what);
	else
		t_assert(!waits, "%s: %d calls waited for the device while %d "
			 "were posted: a post waits for its copy", what, waits,
			 N);
	reap(&a, ctx, DB, s, what);
	t_ok("%s: %d calls waited for the device while %d were posted%s",
	     what, waits, N, sync ? " (HMEMLOOP_ASYNC=0)" : "");
	fx_close();
}

/* ---- 12. copies go to the driver together (a process of its own) -------- */

/*
 * N writes posted, then their entries read, with the double's trace
 * caught: the copies went to the driver in batches of more than one (the
 * first, to an idle stream, alone): launches of hmemloop's copy kernel,
 * or with HMEMLOOP_KERNEL=0 cuMemcpyBatchAsync; unless HMEMLOOP_BATCH=0
 * or the driver is older than the 13.0 API (CUDA_DOUBLE_VERSION), where
 * each went alone (cuMemcpyAsync). The bytes are right either way.
 */
void child_batch(void)
{
	const char *what = "fi_write device to device, copies to the driver";
	const char *off = getenv("HMEMLOOP_BATCH");
	const char *version = getenv("CUDA_DOUBLE_VERSION");
	const char *kernel = getenv("HMEMLOOP_KERNEL");
	bool alone = (off && !strcmp(off, "0")) ||
		     (version && atoi(version) < 13000);
	bool engines = kernel && !strcmp(kernel, "0");
	int saved, batches, launches, singles;
	FILE *log;
	unsigned s;

	if (!(log = post_caught(what, &s, &saved)))
		return;
	reap(&a, ctx, -1, 0, what);
	caught(saved);
	batches = calls_in(log, "cuMemcpyBatchAsync");
	launches = calls_in(log, "cuLaunchKernel");
	singles = calls_in(log, "cuMemcpyAsync");
	fclose(log);
	for (int i = 0; i < N; i++)
		check_slot(DB, i, LEN, s + i, what);
	if (alone)
		t_assert(!batches && !launches && singles == N, "%s: %d "
			 "batches, %d launches and %d single copies for %d "
			 "writes, expected %d single", what, batches, launches,
			 singles, N, N);
	else
		t_assert((engines ? batches && !launches :
				    launches && !batches) &&
			 batches + launches + singles < N, "%s: %d batches, "
			 "%d launches and %d single copies for %d writes, "
			 "expected fewer %s than writes", what, batches,
			 launches, singles, N, engines ? "batches" :
			 "kernel launches");
	t_ok("%s: %d batches, %d kernel launches and %d single copies for %d "
	     "writes", what, batches, launches, singles, N);
	fx_close();
}

/*
 * A write among others in flight whose source runs past the end of its
 * allocation must not reach the copy kernel: on a GPU the kernel's fault
 * would take the application's context (the double stops the process).
 * It goes to the copy engines, which refuse it: its own error, FI_EIO, and
 * the others land.
 */
void child_kernel_bounds(void)
{
	const char *what = "a write past its buffer's allocation among writes "
			   "in flight";
	const int bad = FAIL_OP;
	CUdeviceptr base;
	size_t size;
	unsigned s;

	if (!fx_open(NULL, what))
		return;
	t_cu(cuMemGetAddressRange(&base, &size,
				  (CUdeviceptr) (uintptr_t) buf[DA]));
	s = fill(DA);
	zero(DB);
	for (int i = 0; i < N; i++) {
		void *l = i == bad ? (void *) (uintptr_t) (base + size - LEN / 2) :
				     (char *) buf[DA] + (size_t) i * LEN;

		t_post(a.cq, fi_write(a.ep, l, LEN, mr[DA].desc, a_to_b,
				      t_raddr(&f, &mr[DB], (size_t) i * LEN),
				      mr[DB].key, &ctx[i]));
	}
	one_failed(bad, s, what);
	fx_close();
}

/*
 * Writes between device memory and pinned host memory (cuMemHostRegister)
 * in flight go to the copy kernel too (counted where the double traces
 * the calls), both ways, and land. Writes into host memory registered
 * read-only, every other one of writes in flight, the rest device to
 * device, must not reach it: on a GPU the kernel's stores would take the
 * application's context (the double stops the process). The engines
 * refuse them: each completes with FI_EIO, no byte there changes, and the
 * others land. Then the source is unpinned (cuMemHostUnregister) under its
 * region, and writes from it must not reach the kernel either.
 */
void child_kernel_host(void)
{
	const char *what = "fi_write between device and pinned host memory";
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	int saved, launches;
	FILE *log;
	unsigned s;

	if (!fx_open(NULL, what))
		return;
	zero(HB);
	t_cu(cuMemHostRegister(buf[HA], SPAN, 0));
	t_cu(cuMemHostRegister(buf[HB], SPAN, CU_MEMHOSTREGISTER_READ_ONLY));
	log = catch(&saved);
	s = fill(HA);
	zero(DB);
	post_all(&a, WRITE, HA, DB, ctx);
	reap(&a, ctx, DB, s, what);
	s = fill(DA);
	zero(HA);
	post_all(&a, WRITE, DA, HA, ctx);
	reap(&a, ctx, HA, s, what);
	caught(saved);
	launches = calls_in(log, "cuLaunchKernel");
	fclose(log);
	t_assert(launches || !t_cuda_double(), "%s: no kernel launch for %d "
		 "writes each way", what, N);
	zero(DB);
	for (int i = 0; i < N; i++)
		post(&a, WRITE, DA, (size_t) i * LEN, i % 2 ? HB : DB,
		     (size_t) i * LEN, &ctx[i], 0);
	for (int n = 0; n < N; n++) {
		int ret = t_wait(a.cq, &e, &err);
		int i = op_in(ret ? err.op_context : e.op_context, ctx);

		t_assert(ret >= 0 && i >= 0 && ret == i % 2 &&
			 (!ret || err.err == FI_EIO), "%s: completion %d of "
			 "%d: write %d to %s: %d (%s)", what, n, N, i,
			 i % 2 ? "read-only memory" : "device memory", ret,
			 ret == 1 ? fi_strerror(err.err) : "");
		if (!ret)
			check_slot(DB, i, LEN, s + i, what);
	}
	get(tmp, HB, 0, SPAN);
	for (size_t i = 0; i < SPAN; i++)
		t_assert(!tmp[i], "%s: byte %zu of read-only memory written",
			 what, i);
	t_cu(cuMemHostUnregister(buf[HA]));
	s = fill(HA);
	zero(DB);
	post_all(&a, WRITE, HA, DB, ctx);
	reap(&a, ctx, DB, s, what);
	t_cu(cuMemHostUnregister(buf[HB]));
	if (t_cuda_double())
		t_ok("%s: %d kernel launches for %d writes each way", what,
		     launches, N);
	t_ok("%s: of %d writes in flight, those into read-only memory "
	     "failed; writes from memory unpinned since landed", what, N);
	fx_close();
}
