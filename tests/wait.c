/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Waiting: every way an application waits for completions sees the ones
 * hmemloop reports for same-process device operations, which the provider
 * never hears of. Blocking CQ reads (fi_cq_sread, fi_cq_sreadfrom,
 * FI_CQ_COND_THRESHOLD, fi_cq_signal), a CQ's exported wait object with
 * fi_trywait, counters and theirs, error entries in the layout of each API
 * version, wait sets and poll sets holding a CQ or a counter, and
 * blocking reads where the receives of a tracked endpoint complete. A
 * counter is tried where each kind of operation counts (the initiator's,
 * the target's, its region's, the receive's).
 *
 * Each case opens a fabric of its own: endpoints a and b in one domain,
 * b's address in a's address vector (so b's receives are recorded), and
 * two registered device buffers. A wait that must end early is given 5 s
 * and must end within 1 s, so that without hmemloop (or without its wait
 * handling) every case fails rather than hangs; the cases of counters'
 * wait objects run in processes of their own, under a time limit.
 * "-c NAME,..." runs only the cases named; a provider without a wait
 * object kind or feature skips that case, saying so.
 *
 * The fixture, operations and waiting thread are in wait_fx.c; the cases,
 * one file a section: wait_sread.c (1. fi_cq_sread, fi_cq_sreadfrom),
 * wait_fd.c (2. FI_GETWAIT, fi_trywait), wait_cntr.c (3. counters, their
 * wait objects),
 * wait_err.c (4. error entries), wait_sets.c (5. wait sets, poll sets),
 * wait_tracked.c (6. tracked receives).
 */
#include "wait.h"

/* A case of its own process, under a time limit: what failed as a hang. */
#define FRESH(n, fn) \
	{ .name = (n), .run = (fn), .fresh = true, .wait_s = 5 }

static const struct t_case cases[] = {
	T_CASE("sread_queued", sread_queued),
	T_CASE("sread_woken", sread_woken),
	T_CASE("sread_signal", sread_signal),
	T_CASE("sread_source", sread_source),
	T_CASE("sread_threshold", sread_threshold),
	T_CASE("sread_error", sread_error),
	T_CASE("getwait", getwait),
	T_CASE("trywait_loop", trywait_loop),
	T_CASE("sread_race", sread_race),
	T_CASE("cntr", cntr_run),
	T_CASE("cq_err_1_17", cq_err),
	T_CASE("cq_err_1_4", cq_err_1_4),
	T_CASE("cq_err_1_20", cq_err_1_20),
	T_CASE("waitset", waitset),
	T_CASE("pollset", pollset),
	T_CASE("tracked_sread", tracked_sread),
	T_CASE("sread_rewait", sread_rewait),
	FRESH("cntr_fd", cntr_fd),
	FRESH("cntr_trywait_loop", cntr_trywait_loop),
	FRESH("cntr_waitset", cntr_waitset),
	FRESH("cntr_pollset", cntr_pollset),
};

static double t0;

static void setup(void)
{
	struct t_fabric f;

	t0 = t_now();
	t_cu(cuCtxGetCurrent(&cu_ctx));
	if (t_try_open(&f, NULL))
		t_skip("provider %s is not available here", t_prov);
	t_close(&f);
	/* Some providers' libraries (psm) catch SIGSEGV to write a report
	 * file: without hmemloop a crash is a crash. */
	signal(SIGSEGV, SIG_DFL);
	signal(SIGBUS, SIG_DFL);
	dsrc = t_dev_alloc(LEN);
	ddst = t_dev_alloc(LEN);
}

static void teardown(void)
{
	t_dev_free(dsrc);
	t_dev_free(ddst);
	printf("%s: %d skipped, %.1f s\n", t_prov, t_skips(),
	       t_now() - t0);
}

T_MAIN(cases, .flags = T_CUDA, .setup = setup, .teardown = teardown);
