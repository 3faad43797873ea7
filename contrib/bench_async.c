/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Mode 1 and --cross: the message rates of the hmemloop methods under
 * HMEMLOOP_ASYNC=0 (each call waits for its copy) and =1 (a call queues
 * its copy; a later CQ or counter read completes it), in one run. hmemloop
 * reads its settings once, at load, so each setting has a worker: this
 * program started again ("--rate-worker 0|1") with the setting in its
 * environment and the wrapper's. The parent asks them point by point,
 * between its own methods, so that drift hits all alike; --mixed is
 * theirs too. One line a command on the worker's stdin and stdout:
 *	worker: ready | fail WHY	after its buffers and provider opened
 *	rate M D LEN	method M's rate, direction D, LEN bytes; first at
 *			each (M, D), the bytes are checked
 *			-> ok OPS SECS | fail WHY
 *	mixed LEN	--mixed at LEN	-> ok OPS SECS TMIN TMAX | fail WHY
 * and end of input ends it.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_dev.h"
#include "hml_config.h"

/* Buffers, provider and the first checks before "ready". */
#define START_TIMEOUT_S 300.0

struct worker {
	pid_t pid;
	int fd;
	bool dead;
	char line[512];
	/* Where a method and direction failed: no more asked there. */
	char failed[B_MAX_DIRS][NMETHODS][160];
};

static struct worker wk[2];
static bool running;
/* The workers' HMEMLOOP_STATS files, where the run set none itself. */
static char stats_dir[64];

static const char *const setting[2] = {
	"HMEMLOOP_ASYNC=0", "HMEMLOOP_ASYNC=1",
};

/* Append a sentence to a note. */
static void note_add(char *note, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void note_add(char *note, size_t len, const char *fmt, ...)
{
	size_t n = strlen(note);
	va_list ap;

	if (n && n + 2 < len) {
		strcpy(note + n, "; ");
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(note + n, len - n, fmt, ap);
	va_end(ap);
}

/* A worker that gave no answer is ended; what it says after is lost. */
static void lost(struct worker *w, int i, const char *what)
{
	char how[64], said[200];

	snprintf(said, sizeof(said), "%s", what);
	snprintf(how, sizeof(how), "%s", b_ended(w->pid, true));
	snprintf(w->line, sizeof(w->line), "the %s worker %s: %s", setting[i],
		 said, how);
	fprintf(stderr, "hmemloop-bench: %s\n", w->line);
	close(w->fd);
	w->dead = true;
}

/* The worker's answer to cmd, in w->line: "ok ..." or "fail ...", or
 * NULL (and why in w->line) where it is gone. */
static const char *ask(int i, double timeout, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static const char *ask(int i, double timeout, const char *fmt, ...)
{
	struct worker *w = &wk[i];
	char cmd[128];
	va_list ap;
	int ret;

	if (w->dead)
		return NULL;
	va_start(ap, fmt);
	ret = b_vask(w->fd, w->line, sizeof(w->line), timeout, cmd,
		     sizeof(cmd), fmt, ap);
	va_end(ap);
	if (ret) {
		lost(w, i, "gave no answer");
		return NULL;
	}
	return w->line;
}

/* A point may take a warm-up window and --max-time, and a stall. */
static double point_timeout(void)
{
	return 2 * b_opt.max_time + b_stall_s + 60;
}

void b_workers_start(struct b_results *r)
{
	char sizes[64], window[16], iters[32], max_time[32], path[96];
	char *argv[] = {
		NULL, "--rate-worker", NULL, "-p", (char *) b_opt.prov,
		"--sizes", sizes, "--window", window, "--iters", iters,
		"--max-time", max_time, NULL, NULL, NULL,
	};
	/* The first of the three NULLs at the end. */
	int extra = sizeof(argv) / sizeof(argv[0]) - 3;

	if (!r->shim)
		return;
	snprintf(sizes, sizeof(sizes), "%zu:%zu", b_opt.min_size,
		 b_opt.max_size);
	snprintf(window, sizeof(window), "%d", b_opt.window);
	snprintf(iters, sizeof(iters), "%ld", b_opt.iters);
	snprintf(max_time, sizeof(max_time), "%.17g", b_opt.max_time);
	if (b_opt.cross)
		argv[extra++] = "--cross";
	if (b_opt.hmem)
		argv[extra++] = "--hmem";
	/* What their sends found: each writes its counts as it exits. */
	strcpy(stats_dir, "/tmp/hmemloop-bench.XXXXXX");
	if (getenv("HMEMLOOP_STATS") || !mkdtemp(stats_dir)) {
		stats_dir[0] = '\0';
	} else {
		snprintf(path, sizeof(path), "%s/w.%%p.json", stats_dir);
		setenv("HMEMLOOP_STATS", path, 1);
	}
	/* A worker that died is a note, not the end of the run. */
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < 2; i++) {
		argv[2] = i ? "1" : "0";
		wk[i].pid = b_spawn(argv, setting[i], &wk[i].fd);
	}
	if (stats_dir[0])
		unsetenv("HMEMLOOP_STATS");
	/* Both up before anything is timed. */
	for (int i = 0; i < 2; i++) {
		struct worker *w = &wk[i];

		if (b_hear(w->fd, w->line, sizeof(w->line),
			   b_now() + START_TIMEOUT_S))
			lost(w, i, "did not start");
		else if (strcmp(w->line, "ready"))
			lost(w, i, w->line);
	}
	running = true;
	r->workers = true;
}

/* The number after "key": in a worker's JSON, added to *sum; -1 where a
 * file or key is missing. */
static void count(const char *json, const char *key, long long *sum)
{
	const char *at = strstr(json, key);

	if (!at || *sum < 0)
		*sum = -1;
	else
		*sum += strtoll(at + strlen(key), NULL, 10);
}

static void read_stats(struct b_results *r)
{
	r->held = r->taken_back = stats_dir[0] ? 0 : -1;
	for (int i = 0; i < 2 && stats_dir[0]; i++) {
		char json[4096] = "", path[96];
		FILE *f;

		snprintf(path, sizeof(path), "%s/w.%d.json", stats_dir,
			 (int) wk[i].pid);
		f = fopen(path, "r");

		if (f) {
			json[fread(json, 1, sizeof(json) - 1, f)] = '\0';
			fclose(f);
			unlink(path);
		}
		count(json, "\"held\": ", &r->held);
		count(json, "\"taken_back\": ", &r->taken_back);
	}
	if (stats_dir[0])
		rmdir(stats_dir);
}

void b_workers_stop(struct b_results *r)
{
	if (!running)
		return;
	for (int i = 0; i < 2; i++)
		if (!wk[i].dead) {
			close(wk[i].fd);
			b_ended(wk[i].pid, false);
		}
	running = false;
	read_stats(r);
}

int b_env_async(void)
{
	return hml_config.async;
}

void b_workers_rate(struct b_results *r, int d, int m, int s)
{
	struct b_point *p = &r->p[d][m][s];
	const char *a;

	for (int i = 0; i < 2; i++) {
		char *failed = wk[i].failed[d][m];

		if (failed[0]) {
			note_add(p->note, sizeof(p->note), "%s", failed);
			continue;
		}
		a = ask(i, point_timeout(), "rate %d %d %zu", m, d,
			r->sizes[s]);
		if (a && sscanf(a, "ok %ld %lf", &p->async_ops[i],
				&p->async_secs[i]) == 2)
			continue;
		p->async_ops[i] = 0;
		snprintf(failed, sizeof(wk[i].failed[d][m]), "%s: %s",
			 setting[i], a ? a : wk[i].line);
		note_add(p->note, sizeof(p->note), "%s", failed);
	}
	p->rate_ops = p->async_ops[b_env_async()];
	p->rate_secs = p->async_secs[b_env_async()];
}

/* Where fi_write D2D was not timed, or a window would not fit in
 * --max-time, --mixed is neither. */
static bool mix_skip(struct b_results *r, int s)
{
	const struct b_point *p = &r->p[0][M_WRITE][s];
	const char *why = NULL;

	if (p->status != P_OK)
		why = "fi_write D2D was not timed at this size";
	else if (p->lat.median * B_MIX_WINDOW > b_opt.max_time)
		why = "a window takes longer than --max-time";
	if (!why)
		return false;
	for (int i = 0; i < 2; i++) {
		r->mix[i][s].status = P_SKIPPED;
		snprintf(r->mix[i][s].note, sizeof(r->mix[i][s].note), "%s",
			 why);
	}
	return true;
}

void b_workers_mixed(struct b_results *r)
{
	for (int s = 0; s < r->nsizes; s++) {
		if (mix_skip(r, s))
			continue;
		for (int i = 0; i < 2; i++) {
			struct b_mix *x = &r->mix[i][s];
			const char *a = ask(i, point_timeout(), "mixed %zu",
					    r->sizes[s]);

			if (a && sscanf(a, "ok %ld %lf %lf %lf", &x->ops,
					&x->secs, &x->tmin, &x->tmax) == 4) {
				x->status = P_OK;
				continue;
			}
			x->status = a ? P_FAILED : P_UNAVAIL;
			snprintf(x->note, sizeof(x->note), "%s",
				 a ? a : wk[i].line);
		}
	}
}

/* ---- the worker ---- */

/* Check the bytes of method m in direction d once, before its first rate:
 * the setting changes when a completion is reported. */
static int rate_checked(struct b_ctx *c, int m, int d, size_t len,
			long *ops, double *secs)
{
	static bool checked[B_MAX_DIRS][NMETHODS];
	const struct b_dir *dir = &b_mode->dirs[d];
	size_t clen = b_opt.max_size < B_CHECK_LEN ? b_opt.max_size :
		      B_CHECK_LEN;

	if (!checked[d][m]) {
		if (b_validate(c, m, dir, clen)) {
			b_prefix("check failed: ");
			return -1;
		}
		checked[d][m] = true;
	}
	return b_rate(c, m, dir, len, ops, secs);
}

static void command(struct b_ctx *c, const char *line)
{
	struct b_mix x = { 0 };
	double secs;
	size_t len;
	long ops;
	int m, d;

	if (sscanf(line, "rate %d %d %zu", &m, &d, &len) == 3 && m >= 0 &&
	    m < NMETHODS && b_mode->methods[m].hmemloop && d >= 0 &&
	    d < b_mode->ndirs && len <= b_opt.max_size) {
		if (rate_checked(c, m, d, len, &ops, &secs))
			b_say(1, "fail %s\n", b_errmsg);
		else
			b_say(1, "ok %ld %.9g\n", ops, secs);
	} else if (sscanf(line, "mixed %zu", &len) == 1 &&
		   len <= b_opt.max_size && b_mode == &b_mode_same) {
		if (b_mixed(c, len, &x))
			b_say(1, "fail %s\n", b_errmsg);
		else
			b_say(1, "ok %ld %.9g %.9g %.9g\n", x.ops, x.secs,
			      x.tmin, x.tmax);
	} else {
		b_die("worker: unknown command '%s'", line);
	}
	if (b_ctx_home(c))
		b_die("worker: %s", b_errmsg);
}

int b_worker_main(void)
{
	char why[256], line[256];
	struct b_ctx c;

	b_mode = b_opt.cross ? &b_mode_cross : &b_mode_same;
	if (b_cuda_open(why, sizeof(why)) ||
	    b_ctx_open(&c, b_opt.max_size, why, sizeof(why))) {
		b_say(1, "fail %s\n", why);
		return 1;
	}
	b_say(1, "ready\n");
	while (!b_hear(0, line, sizeof(line), b_now() + 24 * 3600))
		command(&c, line);
	b_mixed_close();
	b_ctx_close(&c);
	return 0;
}
