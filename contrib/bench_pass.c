/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Mode 2: what hmemloop costs the traffic it passes through. Host-memory
 * messages and RMA writes between two processes, each run a fresh pair
 * started by re-executing this program, in three configurations
 * interleaved run by run: A not preloaded, B preloaded but disabled,
 * C enabled. The pair exchanges provider addresses over pipes through
 * this process, so no port is fixed.
 *
 * A child ("--pp-child server|client") prints "name HEX KEY ADDR", reads
 * its peer's line as "peer HEX KEY ADDR", and the client ends with
 * "result LAT_US P99_US MSG_PER_S WRITES_PER_S".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "bench.h"

#ifndef HML_LIBDIR
#define HML_LIBDIR "/usr/local/lib"
#endif

extern char **environ;

enum { CFG_BARE, CFG_DISABLED, CFG_ENABLED, NCFG };
static const char *cfg_name[NCFG] = {
	"A: not preloaded", "B: disabled", "C: enabled",
};

enum { LAT, P99, MSG, RMA, NMETRIC };
#define MAX_RUNS 100
#define RUN_TIMEOUT_S 120

struct series {
	double v[NMETRIC][MAX_RUNS];
	int n;
	bool skip;
	char why[200];
};

/* ---- the coordinator ---- */

static bool is_file(const char *p)
{
	return p && !access(p, R_OK);
}

/* An LD_PRELOAD entry naming libhmemloop, as the wrapper sets it. */
static const char *preloaded_lib(char *buf, size_t len)
{
	const char *pre = getenv("LD_PRELOAD");
	char *save, *tok, copy[PATH_MAX * 2];

	if (!pre)
		return NULL;
	snprintf(copy, sizeof(copy), "%s", pre);
	for (tok = strtok_r(copy, " :", &save); tok;
	     tok = strtok_r(NULL, " :", &save))
		if (strstr(tok, "libhmemloop") && is_file(tok)) {
			snprintf(buf, len, "%s", tok);
			return buf;
		}
	return NULL;
}

static const char *find_lib(const char *self)
{
	static char path[PATH_MAX + 64];
	static const char *near[] = {
		"../.libs/libhmemloop.so",	/* build tree: contrib/ */
		".libs/libhmemloop.so",
		"../lib/libhmemloop.so",	/* installed */
		"../lib64/libhmemloop.so",
	};
	char dir[PATH_MAX], *slash;

	if (b_opt.lib) {
		if (!is_file(b_opt.lib))
			b_die("--lib %s: not readable", b_opt.lib);
		return b_opt.lib;
	}
	if (preloaded_lib(path, sizeof(path)))
		return path;
	snprintf(dir, sizeof(dir), "%s", self);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	for (size_t i = 0; i < sizeof(near) / sizeof(near[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, near[i]);
		if (is_file(path))
			return realpath(path, NULL);
	}
	snprintf(path, sizeof(path), "%s/libhmemloop.so", HML_LIBDIR);
	if (is_file(path))
		return path;
	b_die("libhmemloop.so not found near %s nor in %s: pass --lib PATH",
	      self, HML_LIBDIR);
}

/* The caller's preloads without hmemloop's, space-separated. */
static void other_preloads(char *buf, size_t len)
{
	const char *pre = getenv("LD_PRELOAD");
	char *save, *tok, copy[PATH_MAX * 2];
	size_t used = 0;

	buf[0] = '\0';
	if (!pre)
		return;
	snprintf(copy, sizeof(copy), "%s", pre);
	for (tok = strtok_r(copy, " :", &save); tok;
	     tok = strtok_r(NULL, " :", &save))
		if (!strstr(tok, "libhmemloop") && used < len)
			used += snprintf(buf + used, len - used, "%s%s",
					 used ? " " : "", tok);
}

/* The environment of a child in configuration cfg. */
static char **child_env(int cfg, const char *lib)
{
	static char pre[PATH_MAX * 3], enable[] = "HMEMLOOP_ENABLE=1";
	char others[PATH_MAX * 2];
	size_t n = 0, i;
	char **env;

	for (i = 0; environ[i]; i++)
		;
	env = calloc(i + 3, sizeof(*env));
	if (!env)
		b_die("out of memory");
	for (i = 0; environ[i]; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) &&
		    strncmp(environ[i], "HMEMLOOP_ENABLE=", 16))
			env[n++] = environ[i];
	other_preloads(others, sizeof(others));
	if ((size_t) snprintf(pre, sizeof(pre), "LD_PRELOAD=%s%s%s",
			     cfg == CFG_BARE ? "" : lib,
			     cfg != CFG_BARE && others[0] ? " " : "",
			     others) >= sizeof(pre))
		b_die("LD_PRELOAD is too long");
	if (strcmp(pre, "LD_PRELOAD="))
		env[n++] = strdup(pre);
	if (cfg == CFG_ENABLED)
		env[n++] = enable;
	return env;
}

struct child {
	pid_t pid;
	int in, out;
	char line[1024];
};

static void spawn(struct child *ch, const char *self, const char *role,
		  const char *prov, char **env)
{
	char iters[32], size[32];
	char *argv[] = {
		(char *) self, "--pp-child", (char *) role, "-p", (char *) prov,
		"--iters", iters, "--msg-size", size,
		b_opt.own_address ? "--own-address" : NULL, NULL,
	};
	int to[2], from[2];

	snprintf(iters, sizeof(iters), "%ld", b_opt.iters);
	snprintf(size, sizeof(size), "%zu", b_opt.msg_size);
	/* Close-on-exec: the other child must not hold these pipes open. */
	if (pipe2(to, O_CLOEXEC) || pipe2(from, O_CLOEXEC))
		b_die("pipe: %s", strerror(errno));
	fflush(NULL);
	ch->pid = fork();
	if (ch->pid < 0)
		b_die("fork: %s", strerror(errno));
	if (!ch->pid) {
		/* Kept across execve: the pair dies with the coordinator. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(to[0], 0);
		dup2(from[1], 1);
		execve(self, argv, env);
		fprintf(stderr, "hmemloop-bench: %s: %s\n", self,
			strerror(errno));
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	ch->in = to[1];
	ch->out = from[0];
}

/* One line from a child, by the deadline: 0, or -1 on EOF or timeout. */
static int read_line(struct child *ch, double deadline)
{
	struct pollfd p = { .fd = ch->out, .events = POLLIN };
	size_t n = 0;
	int ms;

	while (n < sizeof(ch->line) - 1) {
		ms = (int) ((deadline - b_now()) * 1000);
		if (ms <= 0 || poll(&p, 1, ms) <= 0)
			return -1;
		if (read(ch->out, ch->line + n, 1) != 1)
			return -1;
		if (ch->line[n] == '\n')
			break;
		n++;
	}
	ch->line[n] = '\0';
	return 0;
}

static void finish(struct child *ch, double deadline)
{
	int st;

	close(ch->in);
	close(ch->out);
	while (waitpid(ch->pid, &st, WNOHANG) == 0) {
		if (b_now() > deadline) {
			kill(ch->pid, SIGKILL);
			waitpid(ch->pid, &st, 0);
			return;
		}
		usleep(10000);
	}
}

static int forward(struct child *from, struct child *to)
{
	if (strncmp(from->line, "name ", 5))
		return -1;
	return dprintf(to->in, "peer %s\n", from->line + 5) < 0 ? -1 : 0;
}

/* One run: a fresh server and client; 0 with the client's figures. */
static int run_pair(const char *self, const char *prov, char **env,
		    double out[NMETRIC], char *why, size_t whylen)
{
	struct child s, c;
	double deadline = b_now() + RUN_TIMEOUT_S;
	int ret = -1;

	snprintf(why, whylen, "the pair gave no result (see its stderr)");
	spawn(&s, self, "server", prov, env);
	spawn(&c, self, "client", prov, env);
	if (read_line(&s, deadline) || read_line(&c, deadline))
		goto out;
	if (!strncmp(s.line, "skip ", 5)) {
		snprintf(why, whylen, "%.150s", s.line + 5);
		ret = 1;
		goto out;
	}
	if (forward(&s, &c) || forward(&c, &s) || read_line(&c, deadline))
		goto out;
	if (sscanf(c.line, "result %lf %lf %lf %lf", &out[LAT], &out[P99],
		   &out[MSG], &out[RMA]) == 4)
		ret = 0;
out:
	/* Ending the pair by PID: a failed run must not linger. */
	if (ret)
		deadline = b_now();
	finish(&c, deadline + 5);
	finish(&s, deadline + 5);
	return ret;
}

static double median_of(const double *v, int n)
{
	double tmp[MAX_RUNS];
	struct b_stats s;

	memcpy(tmp, v, n * sizeof(*v));
	b_stats(tmp, n, &s);
	return s.median;
}

static void spread(const double *v, int n, double *lo, double *hi)
{
	*lo = *hi = v[0];
	for (int i = 1; i < n; i++) {
		if (v[i] < *lo)
			*lo = v[i];
		if (v[i] > *hi)
			*hi = v[i];
	}
}

/* About three significant digits, never an exponent. */
static const char *num(double v, char *b, size_t len)
{
	snprintf(b, len, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" :
		 v >= 1 ? "%.2f" : "%.3f", v);
	return b;
}

/* "median [min-max]" */
static void cell(const double *v, int n, double scale, char *b, size_t len)
{
	char x[3][24];
	double lo, hi;

	spread(v, n, &lo, &hi);
	snprintf(b, len, "%s [%s-%s]", num(median_of(v, n) * scale, x[0], 24),
		 num(lo * scale, x[1], 24), num(hi * scale, x[2], 24));
}

/* Ratio of medians, and the range of the run-by-run ratios. */
static void ratio_cell(const struct series *x, const struct series *a,
		       int k, char *b, size_t len)
{
	double r[MAX_RUNS], lo, hi;
	int n = x->n < a->n ? x->n : a->n;

	if (n < 1) {
		snprintf(b, len, "-");
		return;
	}
	for (int i = 0; i < n; i++)
		r[i] = x->v[k][i] / a->v[k][i];
	spread(r, n, &lo, &hi);
	snprintf(b, len, "%.3f [%.2f-%.2f]",
		 median_of(x->v[k], x->n) / median_of(a->v[k], a->n), lo, hi);
}

static void report_provider(const char *prov, struct series *sr)
{
	static const struct {
		int k;
		const char *name;
		double scale;
	} rows[] = {
		{ LAT, "latency, µs", 1 },
		{ MSG, "messages, k/s", 1e-3 },
		{ RMA, "fi_write, k/s", 1e-3 },
	};
	char b[128];

	printf("\n== %s ==\n", prov);
	for (int c = 0; c < NCFG; c++)
		if (sr[c].skip || !sr[c].n) {
			printf("%s: %s\n", cfg_name[c], sr[c].skip ? sr[c].why :
			       "no run succeeded");
			return;
		}
	printf("%-15s", "median [min-max]");
	for (int c = 0; c < NCFG; c++)
		printf(" %-24s", cfg_name[c]);
	printf(" %-18s %-18s\n", "B/A [run by run]", "C/A [run by run]");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		printf("%-15s", rows[i].name);
		for (int c = 0; c < NCFG; c++) {
			cell(sr[c].v[rows[i].k], sr[c].n, rows[i].scale, b,
			     sizeof(b));
			printf(" %-24s", b);
		}
		ratio_cell(&sr[CFG_DISABLED], &sr[CFG_BARE], rows[i].k, b,
			   sizeof(b));
		printf(" %-18s", b);
		ratio_cell(&sr[CFG_ENABLED], &sr[CFG_BARE], rows[i].k, b,
			   sizeof(b));
		printf(" %-18s\n", b);
	}
	printf("runs: %d %d %d\n", sr[0].n, sr[1].n, sr[2].n);
}

static void csv_runs(FILE *f, const char *prov, int cfg, struct series *s)
{
	static const char *names[NCFG] = { "not_preloaded", "disabled",
					   "enabled" };

	for (int i = 0; i < s->n; i++)
		fprintf(f, "\"%s\",%s,%d,%zu,%.4f,%.4f,%.6g,%.6g\n", prov,
			names[cfg], i + 1, b_opt.msg_size, s->v[LAT][i],
			s->v[P99][i], s->v[MSG][i], s->v[RMA][i]);
}

static void header(const char *lib)
{
	printf("hmemloop-bench --passthrough: what hmemloop costs traffic it "
	       "does not intercept\n");
	printf("library: %s\n", lib);
	printf("two processes, %zu-byte host-memory transfers; each run a "
	       "fresh pair; configurations interleaved A B C, %d runs each\n",
	       b_opt.msg_size, b_opt.runs);
	printf("  A: not preloaded; B: preloaded, HMEMLOOP_ENABLE unset; "
	       "C: preloaded, HMEMLOOP_ENABLE=1\n");
	printf("  latency: half the fi_send/fi_recv round trip, median of "
	       "%ld round trips\n", b_opt.iters);
	printf("  messages: fi_send stream, windows of %d acknowledged by the "
	       "receiver; fi_write: stream with %d in flight\n", B_WINDOW,
	       B_WINDOW);
	printf("  each cell: median of the runs [min-max]; ratios: of the "
	       "medians [min-max of the run-by-run ratios]\n");
	printf("  each endpoint's own address in its AV: %s\n",
	       b_opt.own_address ? "yes (--own-address)" : "no");
}

int b_pass_main(char **argv)
{
	static struct series sr[8][NCFG];
	static const char *defaults[] = { "tcp;ofi_rxm", "shm" };
	const char **provs = b_opt.nprovs ? b_opt.provs : defaults;
	int nprovs = b_opt.nprovs ? b_opt.nprovs : 2;
	char self[PATH_MAX], why[200];
	const char *lib;
	double out[NMETRIC];
	ssize_t n;

	(void) argv;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		b_die("/proc/self/exe: %s", strerror(errno));
	self[n] = '\0';
	if (b_opt.runs > MAX_RUNS)
		b_die("--runs: at most %d", MAX_RUNS);
	lib = find_lib(self);
	setvbuf(stdout, NULL, _IOLBF, 0);
	header(lib);
	for (int r = 0; r < b_opt.runs; r++) {
		for (int p = 0; p < nprovs; p++) {
			for (int c = 0; c < NCFG; c++) {
				struct series *s = &sr[p][c];
				int ret;

				if (s->skip)
					continue;
				ret = run_pair(self, provs[p],
					       child_env(c, lib), out, why,
					       sizeof(why));
				if (ret > 0) {
					s->skip = true;
					snprintf(s->why, sizeof(s->why), "%s",
						 why);
				} else if (ret < 0) {
					fprintf(stderr, "%s, %s, run %d: %s\n",
						provs[p], cfg_name[c], r + 1,
						why);
				} else {
					for (int k = 0; k < NMETRIC; k++)
						s->v[k][s->n] = out[k];
					s->n++;
				}
			}
		}
	}
	for (int p = 0; p < nprovs; p++)
		report_provider(provs[p], sr[p]);
	if (b_opt.csv) {
		FILE *f = fopen(b_opt.csv, "w");

		if (!f)
			b_die("%s: %s", b_opt.csv, strerror(errno));
		fprintf(f, "provider,config,run,msg_size,lat_us,lat_p99_us,"
			"msg_per_s,write_per_s\n");
		for (int p = 0; p < nprovs; p++)
			for (int c = 0; c < NCFG; c++)
				csv_runs(f, provs[p], c, &sr[p][c]);
		if (fclose(f))
			b_die("%s: %s", b_opt.csv, strerror(errno));
		printf("CSV: %s\n", b_opt.csv);
	}
	for (int p = 0; p < nprovs; p++)
		for (int c = 0; c < NCFG; c++)
			if (!sr[p][c].skip && sr[p][c].n < b_opt.runs)
				return 1;
	return 0;
}

/* ---- a child of the pair ---- */

struct peer {
	struct b_fab fab;
	struct b_ep e;
	fi_addr_t addr;
	char *sbuf, *rbuf, *tbuf;	/* send, receive, RMA target */
	struct fid_mr *smr, *rmr, *tmr;
	uint64_t rkey, raddr;		/* the peer's target */
	size_t len;
};

/* A context per operation, as applications pass them; never reused while
 * its operation can be outstanding. */
static struct fi_context ctxs[4 * B_WINDOW];
static unsigned next_ctx;

static void *ctx(void)
{
	return &ctxs[next_ctx++ % (4 * B_WINDOW)];
}

static void check(int ret)
{
	if (ret)
		b_die("%s: %s", b_opt.child_role, b_errmsg);
}

static void post_recv(struct peer *p, long n)
{
	ssize_t ret;

	for (long i = 0; i < n; i++) {
		B_POST(ret, fi_recv(p->e.ep, p->rbuf, p->len, fi_mr_desc(p->rmr),
				    FI_ADDR_UNSPEC, ctx()));
		check(b_post_failed(ret, "fi_recv"));
	}
}

static void post_send(struct peer *p, long n)
{
	ssize_t ret;

	for (long i = 0; i < n; i++) {
		B_POST(ret, fi_send(p->e.ep, p->sbuf, p->len, fi_mr_desc(p->smr),
				    p->addr, ctx()));
		check(b_post_failed(ret, "fi_send"));
	}
}

static void hex_out(const char *name, size_t len, uint64_t key, uint64_t addr)
{
	printf("name ");
	for (size_t i = 0; i < len; i++)
		printf("%02x", (unsigned char) name[i]);
	printf(" %llu %llu\n", (unsigned long long) key,
	       (unsigned long long) addr);
	fflush(stdout);
}

static void hex_in(struct peer *p)
{
	char line[1200], hex[1100], name[512];
	unsigned long long key, addr;
	size_t n;

	if (!fgets(line, sizeof(line), stdin) ||
	    sscanf(line, "peer %1099s %llu %llu", hex, &key, &addr) != 3)
		b_die("%s: no peer address", b_opt.child_role);
	for (n = 0; n < sizeof(name) && hex[2 * n] && hex[2 * n + 1]; n++)
		sscanf(hex + 2 * n, "%2hhx", (unsigned char *) &name[n]);
	p->addr = b_av_insert(&p->e, name);
	p->rkey = key;
	p->raddr = addr;
}

static char *page_alloc(size_t len)
{
	void *p;

	if (posix_memalign(&p, 4096, len))
		b_die("out of memory");
	memset(p, 0, len);
	return p;
}

static void peer_open(struct peer *p)
{
	int ret = b_fab_open(&p->fab, b_opt.prov);

	if (ret) {
		printf("skip provider %s is not available here\n", b_opt.prov);
		exit(0);
	}
	b_ep_open(&p->e, &p->fab);
	if (b_opt.own_address)
		b_av_insert(&p->e, p->e.name);
	p->len = b_opt.msg_size;
	p->sbuf = page_alloc(p->len);
	p->rbuf = page_alloc(p->len);
	p->tbuf = page_alloc(p->len);
	p->smr = b_mr_reg(&p->fab, p->sbuf, p->len, 1, -1);
	p->rmr = b_mr_reg(&p->fab, p->rbuf, p->len, 2, -1);
	p->tmr = b_mr_reg(&p->fab, p->tbuf, p->len, 3, -1);
	hex_out(p->e.name, p->e.namelen, fi_mr_key(p->tmr),
		b_raddr(&p->fab, p->tbuf));
	hex_in(p);
}

static long stream_ops(void)
{
	long n = b_opt.iters * 10 / B_WINDOW * B_WINDOW;

	return n < B_WINDOW ? B_WINDOW : n;
}

static long warm_ops(void)
{
	return b_opt.iters / 10 < 10 ? 10 : b_opt.iters / 10;
}

static void serve(struct peer *p)
{
	long total = warm_ops() + b_opt.iters;
	long windows = stream_ops() / B_WINDOW;

	/* Ping-pong: the next receive is posted before each reply. */
	post_recv(p, 1);
	for (long i = 0; i < total; i++) {
		check(b_cq_wait(p->e.rx, 1));
		if (i + 1 < total)
			post_recv(p, 1);
		post_send(p, 1);
		check(b_cq_wait(p->e.tx, 1));
	}
	/* Message stream: a window's receives are posted before the message
	 * that lets the client send it; the last is for "done". */
	post_recv(p, B_WINDOW);
	post_send(p, 1);
	check(b_cq_wait(p->e.tx, 1));
	for (long w = 0; w < windows; w++) {
		check(b_cq_wait(p->e.rx, B_WINDOW));
		post_recv(p, w + 1 < windows ? B_WINDOW : 1);
		post_send(p, 1);
		check(b_cq_wait(p->e.tx, 1));
	}
	/* The writes land while this waits for "done". */
	check(b_cq_wait(p->e.rx, 1));
}

static void ping_pong(struct peer *p, struct b_stats *lat)
{
	long warm = warm_ops();
	double *v = malloc(sizeof(*v) * b_opt.iters), t0;

	if (!v)
		b_die("out of memory");
	for (long i = 0; i < warm + b_opt.iters; i++) {
		post_recv(p, 1);
		t0 = b_now();
		post_send(p, 1);
		check(b_cq_wait(p->e.tx, 1));
		check(b_cq_wait(p->e.rx, 1));
		if (i >= warm)
			v[i - warm] = (b_now() - t0) / 2;
	}
	b_stats(v, b_opt.iters, lat);
	free(v);
}

static double msg_stream(struct peer *p)
{
	long windows = stream_ops() / B_WINDOW;
	double t0;

	post_recv(p, 1);
	check(b_cq_wait(p->e.rx, 1));	/* the server is ready */
	t0 = b_now();
	for (long w = 0; w < windows; w++) {
		post_recv(p, 1);
		post_send(p, B_WINDOW);
		check(b_cq_wait(p->e.tx, B_WINDOW));
		check(b_cq_wait(p->e.rx, 1));
	}
	return windows * B_WINDOW / (b_now() - t0);
}

static double write_stream(struct peer *p)
{
	long n = stream_ops(), posted = 0, done = 0, got;
	double t0 = b_now(), t;
	ssize_t ret;

	while (done < n) {
		while (posted < n && posted - done < B_WINDOW) {
			ret = fi_write(p->e.ep, p->sbuf, p->len,
				       fi_mr_desc(p->smr), p->addr, p->raddr,
				       p->rkey, ctx());
			if (ret == -FI_EAGAIN)
				break;
			check(b_post_failed(ret, "fi_write"));
			posted++;
		}
		got = b_cq_poll(p->e.tx, posted - done);
		check(got < 0);
		if (!got) {
			b_progress();
			if (b_now() - t0 > RUN_TIMEOUT_S)
				b_die("client: fi_write stream stalled");
		}
		done += got;
	}
	t = b_now() - t0;
	post_send(p, 1);		/* "done" */
	check(b_cq_wait(p->e.tx, 1));
	return n / t;
}

int b_pass_child(void)
{
	struct peer p;
	struct b_stats lat;
	double msg, rma;

	if (!b_opt.prov)
		b_die("--pp-child needs -p");
	memset(&p, 0, sizeof(p));
	peer_open(&p);
	if (!strcmp(b_opt.child_role, "server")) {
		serve(&p);
	} else {
		ping_pong(&p, &lat);
		msg = msg_stream(&p);
		rma = write_stream(&p);
		printf("result %.4f %.4f %.6g %.6g\n", lat.median * 1e6,
		       lat.p99 * 1e6, msg, rma);
		fflush(stdout);
	}
	b_mr_close(p.smr);
	b_mr_close(p.rmr);
	b_mr_close(p.tmr);
	b_ep_close(&p.e);
	b_fab_close(&p.fab);
	return 0;
}
