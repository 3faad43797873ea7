/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Mode 1 and --cross: check that hmemloop is on, probe the hmemloop
 * methods in a child, then time every method of the mode at every size
 * and direction, interleaved (direction, size, method) so that drift hits
 * all methods alike; at a point, the methods take their latency
 * operations in turns.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_dev.h"
#include "hml_config.h"

/* Fewest latency operations a point gets, whatever --max-time says. */
#define MIN_OPS 5
/* The probe's buffers. */
#define PROBE_LEN (64 << 10)
#define PROBE_TIMEOUT_S 120
/* What --cross answers where there is no second device. */
#define EXIT_SKIP 77

const struct b_mode *b_mode;

static void require_shim(struct b_results *r)
{
	bool on = hml_config.enable;

	r->shim = !b_opt.no_shim;
	if (b_opt.no_shim)
		return;
	if (!on)
		b_die("hmemloop is not enabled (HMEMLOOP_ENABLE is not 1).\n"
		      "Run it through the wrapper: hmemloop hmemloop-bench ...\n"
		      "or pass --no-shim to time only the %s.", b_mode->no_shim);
	if (!b_shim_loaded())
		b_die("HMEMLOOP_ENABLE=1 but libhmemloop.so is not loaded: "
		      "run it through the wrapper, hmemloop hmemloop-bench ...");
}

static int make_sizes(struct b_results *r)
{
	size_t s;

	r->nsizes = 0;
	for (s = b_opt.min_size; s < b_opt.max_size && r->nsizes < B_MAX_SIZES;
	     s *= 4)
		r->sizes[r->nsizes++] = s;
	if (r->nsizes == B_MAX_SIZES)
		b_die("too many sizes");
	r->sizes[r->nsizes++] = b_opt.max_size;
	return r->nsizes;
}

/* The child: each hmemloop method, each direction, checked bytes; a line
 * "ok NAME" or "fail NAME REASON" as each method is done. A crash or a
 * hang leaves the methods after it without a line. */
static void probe_child(int fd)
{
	char why[256];
	struct b_ctx c;

	/* Never outlive the bench, whoever kills it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	alarm(PROBE_TIMEOUT_S - 10);
	b_stall_s = 5;
	if (b_cuda_open(why, sizeof(why)) ||
	    b_ctx_open(&c, PROBE_LEN, why, sizeof(why))) {
		dprintf(fd, "setup %s\n", why);
		_exit(1);
	}
	for (int m = 0; m < NMETHODS; m++) {
		const struct b_dir *d, *end = b_mode->dirs + b_mode->ndirs;

		if (!b_mode->methods[m].hmemloop)
			continue;
		for (d = b_mode->dirs; d < end; d++)
			if (b_validate(&c, m, d, PROBE_LEN))
				break;
		if (d < end)
			dprintf(fd, "fail %s %s: %s\n", b_mode->methods[m].name,
				d->name, b_errmsg);
		else
			dprintf(fd, "ok %s\n", b_mode->methods[m].name);
	}
	/* shm leaves an endpoint's region in /dev/shm unless it is closed,
	 * and a later process with this PID then fails fi_enable (EBUSY). */
	b_ctx_close(&c);
	_exit(0);
}

static void describe_exit(int st, char *buf, size_t len)
{
	if (WIFSIGNALED(st))
		snprintf(buf, len, "the probe died of signal %d (%s)",
			 WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		/* libfabric catches SIGSEGV itself and exits 1. */
		snprintf(buf, len, "the probe exited %d before reporting on it "
			 "(a crash? its stderr is above)", WEXITSTATUS(st));
}

static void probe_line(struct b_results *r, char *line)
{
	char *name = strchr(line, ' '), *rest;

	if (!name)
		return;
	*name++ = '\0';
	rest = strchr(name, ' ');
	if (rest)
		*rest++ = '\0';
	if (!strcmp(line, "setup")) {
		for (int m = 0; m < NMETHODS; m++)
			if (b_mode->methods[m].hmemloop)
				snprintf(r->why[m], sizeof(r->why[m]),
					 "the probe could not start: %s %s",
					 name, rest ? rest : "");
		return;
	}
	for (int m = 0; m < NMETHODS; m++)
		if (b_has(m) && !strcmp(b_mode->methods[m].name, name))
			snprintf(r->why[m], sizeof(r->why[m]), "%s",
				 !strcmp(line, "ok") ? "" :
				 rest ? rest : "failed");
}

/* Read the child's lines until it closes the pipe or time runs out. */
static void probe_read(struct b_results *r, int fd, pid_t pid)
{
	char buf[4096], *nl, *line;
	size_t have = 0;
	double end = b_now() + PROBE_TIMEOUT_S;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;

	for (;;) {
		if (poll(&p, 1, 1000) < 0 && errno != EINTR)
			break;
		if (b_now() > end) {
			kill(pid, SIGKILL);
			break;
		}
		if (!(p.revents & (POLLIN | POLLHUP)))
			continue;
		n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n <= 0)
			break;
		have += n;
		buf[have] = '\0';
		for (line = buf; (nl = strchr(line, '\n')); line = nl + 1) {
			*nl = '\0';
			probe_line(r, line);
		}
		have = strlen(line);
		memmove(buf, line, have + 1);
	}
}

/* Before this process touches CUDA or libfabric: a child that crashes
 * or hangs in a method takes only itself down. */
static void probe(struct b_results *r)
{
	char died[128];
	int fd[2], st;
	pid_t pid;

	for (int m = 0; m < NMETHODS; m++)
		if (b_mode->methods[m].hmemloop)
			snprintf(r->why[m], sizeof(r->why[m]), "unprobed");
	if (pipe(fd))
		b_die("pipe: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		b_die("fork: %s", strerror(errno));
	if (!pid) {
		close(fd[0]);
		probe_child(fd[1]);
	}
	close(fd[1]);
	probe_read(r, fd[0], pid);
	close(fd[0]);
	waitpid(pid, &st, 0);
	describe_exit(st, died, sizeof(died));
	for (int m = 0; m < NMETHODS; m++)
		if (!strcmp(r->why[m], "unprobed"))
			snprintf(r->why[m], sizeof(r->why[m]), "%s", died);
}

static void mark(struct b_results *r, int d, int m, int from,
		 enum b_status st, const char *note)
{
	for (int s = from; s < r->nsizes; s++) {
		r->p[d][m][s].status = st;
		snprintf(r->p[d][m][s].note, sizeof(r->p[d][m][s].note), "%s",
			 note);
	}
}

static void check_methods(struct b_ctx *c, struct b_results *r)
{
	size_t len = b_opt.max_size < B_CHECK_LEN ? b_opt.max_size :
		     B_CHECK_LEN;
	char note[320];

	for (int m = 0; m < NMETHODS; m++) {
		const struct b_method *mt = &b_mode->methods[m];

		if (!b_has(m))
			continue;
		for (int d = 0; d < b_mode->ndirs; d++) {
			const struct b_dir *dir = &b_mode->dirs[d];

			if (b_left_out(r, m)) {
				mark(r, d, m, 0, P_NONE, "");
			} else if (r->why[m][0]) {
				mark(r, d, m, 0, P_UNAVAIL, r->why[m]);
			} else if (b_validate(c, m, dir, len)) {
				snprintf(note, sizeof(note), "check failed: %s",
					 b_errmsg);
				fprintf(stderr, "%s %s: %s\n", mt->name,
					dir->name, note);
				mark(r, d, m, 0, P_FAILED, note);
			}
		}
	}
}

/* Up to want operations of method m, each timed into v, at least least
 * of them even past budget seconds. */
static int lat_ops(struct b_ctx *c, int m, const struct b_dir *d, size_t len,
		   double *v, long want, long least, double budget)
{
	const struct b_method *mt = &b_mode->methods[m];
	double end = b_now() + budget, t0, t1;
	long i;

	for (i = 0; i < want; i++) {
		if (mt->prep && mt->prep(c, d, len))
			return -1;
		t0 = b_now();
		if (mt->one(c, d, len))
			return -1;
		t1 = b_now();
		v[i] = t1 - t0;
		if (t1 > end && i + 1 >= least)
			return (int) (i + 1);
	}
	return (int) i;
}

/* The rate is skipped where one window would not fit in --max-time; the
 * workers measure the hmemloop methods'. */
static int rate_ops(struct b_ctx *c, struct b_results *r, int m, int d,
		    int s)
{
	struct b_point *p = &r->p[d][m][s];

	if (p->lat.median * b_opt.window > b_opt.max_time) {
		snprintf(p->note, sizeof(p->note), "rate skipped: %d "
			 "operations take longer than --max-time",
			 b_opt.window);
		return 0;
	}
	if (r->workers && b_mode->methods[m].hmemloop) {
		b_workers_rate(r, d, m, s);
		return 0;
	}
	return b_rate(c, m, &b_mode->dirs[d], r->sizes[s], &p->rate_ops,
		      &p->rate_secs);
}

/* A method's latency operations at a point, so far. */
struct lat {
	double *v;
	long n;
	bool on;	/* measured here, and not failed */
};

static void failed(struct b_results *r, struct lat *l, int d, int m, int s)
{
	char sz[32], note[320];

	b_size_str(r->sizes[s], sz, sizeof(sz));
	snprintf(note, sizeof(note), "failed at %s: %s", sz, b_errmsg);
	fprintf(stderr, "%s %s: %s\n", b_mode->methods[m].name,
		b_mode->dirs[d].name, note);
	mark(r, d, m, s, P_FAILED, note);
	l[m].on = false;
}

/* A warm-up of each method, then its --iters operations in B_LAT_TURNS
 * turns with the others', then the rates. */
static void measure(struct b_ctx *c, struct b_results *r, int d, int s,
		    struct lat *l)
{
	const struct b_dir *dir = &b_mode->dirs[d];
	size_t len = r->sizes[s];
	long turn = (b_opt.iters + B_LAT_TURNS - 1) / B_LAT_TURNS;
	long warm = b_opt.iters / 10;
	int m, n;

	if (warm < 2)
		warm = 2;
	if (warm > 100)
		warm = 100;
	for (m = 0; m < NMETHODS; m++) {
		l[m].n = 0;
		l[m].on = b_has(m) && r->p[d][m][s].status == P_NONE &&
			  !b_left_out(r, m);
		if (l[m].on && (lat_ops(c, m, dir, len, l[m].v, warm, MIN_OPS,
					b_opt.max_time / 4) < 0 || b_ctx_home(c)))
			failed(r, l, d, m, s);
	}
	for (int t = 0; t < B_LAT_TURNS; t++)
		for (m = 0; m < NMETHODS; m++) {
			long want = b_opt.iters - l[m].n;

			if (!l[m].on || !want)
				continue;
			n = lat_ops(c, m, dir, len, l[m].v + l[m].n,
				    want < turn ? want : turn,
				    (MIN_OPS + B_LAT_TURNS - 1) / B_LAT_TURNS,
				    b_opt.max_time / B_LAT_TURNS);
			/* Each method from the home context, as before. */
			if (n < 0 || b_ctx_home(c))
				failed(r, l, d, m, s);
			else
				l[m].n += n;
		}
	for (m = 0; m < NMETHODS; m++) {
		struct b_point *p = &r->p[d][m][s];

		if (!l[m].on)
			continue;
		b_stats(l[m].v, l[m].n, &p->lat);
		p->capped = l[m].n < b_opt.iters;
		if (rate_ops(c, r, m, d, s) || b_ctx_home(c))
			failed(r, l, d, m, s);
		else
			p->status = P_OK;
	}
}

static void skip_big(const struct b_ctx *c, struct b_results *r, int d,
		     int s)
{
	size_t max = c->fab.info->ep_attr->max_msg_size;

	/* Staging's host write goes through the provider. */
	if (b_has(M_STAGING) && r->sizes[s] > max &&
	    r->p[d][M_STAGING][s].status == P_NONE)
		mark(r, d, M_STAGING, s, P_SKIPPED,
		     "larger than the provider's max_msg_size");
}

static void measure_all(struct b_ctx *c, struct b_results *r)
{
	long most = b_opt.iters > 100 ? b_opt.iters : 100;
	struct lat l[NMETHODS];
	char sz[32];

	for (int m = 0; m < NMETHODS; m++)
		if (!(l[m].v = malloc(sizeof(*l[m].v) * most)))
			b_die("out of memory");
	for (int d = 0; d < b_mode->ndirs; d++) {
		for (int s = 0; s < r->nsizes; s++) {
			skip_big(c, r, d, s);
			b_size_str(r->sizes[s], sz, sizeof(sz));
			if (isatty(2))
				fprintf(stderr, "\r%s %-10s",
					b_mode->dirs[d].name, sz);
			measure(c, r, d, s, l);
		}
	}
	if (isatty(2))
		fprintf(stderr, "\r%20s\r", "");
	for (int m = 0; m < NMETHODS; m++)
		free(l[m].v);
}

/* --cross where the process sees one device: no error, nothing to time. */
static void skip_run(void)
{
	fflush(stdout);
	fprintf(stderr, "hmemloop-bench: --cross needs %d CUDA devices; this "
		"process sees %d: skipped\n", b_mode->gpus, b_cuda_count());
	exit(EXIT_SKIP);
}

int b_device_main(void)
{
	static struct b_results r;
	struct b_ctx c;
	char why[256];

	b_mode = b_opt.cross ? &b_mode_cross : &b_mode_same;
	require_shim(&r);
	make_sizes(&r);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (r.shim)
		probe(&r);
	/* No device at all is a reason to skip --cross, not an error. */
	if (b_cuda_open(why, sizeof(why)) &&
	    (b_mode->gpus == 1 || b_cuda_count()))
		b_die("CUDA driver: %s", why);
	if (b_cuda_count() < b_mode->gpus)
		skip_run();
	if (b_ctx_open(&c, b_opt.max_size, why, sizeof(why)))
		b_die("%s", why);
	b_workers_start(&r);
	b_report_header(&c, &r);
	check_methods(&c, &r);
	measure_all(&c, &r);
	if (b_opt.mixed)
		b_workers_mixed(&r);
	b_workers_stop(&r);
	b_report_tables(&r);
	if (b_opt.csv && b_report_csv(&r, b_opt.csv))
		return 1;
	b_ctx_close(&c);
	return 0;
}
