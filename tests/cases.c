/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The case runner every test program shares: its main (T_MAIN, with the
 * same options everywhere), a table of named cases, "-c NAME,..." to run
 * some, a skip that says why, a case in a process of its own (this program
 * again) and what tells the CUDA driver double from a GPU's driver.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hmltest.h"

/* Set in the environment of a case's own process. */
#define FRESH_VAR "HMEMLOOP_TEST_FRESH"

const char *t_only;
static int skips, ran;

bool t_wanted(const char *name)
{
	size_t n = strlen(name);

	if (!t_only)
		return true;
	for (const char *p = t_only; p; p = strchr(p, ',')) {
		p += *p == ',';
		if (!strncmp(p, name, n) && (p[n] == ',' || !p[n]))
			return true;
	}
	return false;
}

bool t_fresh(void)
{
	return t_env(FRESH_VAR) != NULL;
}

void t_case_skip(const char *fmt, ...)
{
	T_SAY("skip", fmt);
	t_trace("skipped");
	skips++;
}

int t_skips(void)
{
	return skips;
}

bool t_shim_enabled(void)
{
	const char *enable = getenv("HMEMLOOP_ENABLE");

	return enable && !strcmp(enable, "1");
}

bool t_cuda_double(void)
{
	char name[64] = "";
	CUdevice dev;

	if (!strcmp(t_env("HMEMLOOP_TEST_CUDA"), "real"))
		return false;
	t_cu(cuDeviceGet(&dev, 0));
	t_cu(cuDeviceGetName(name, sizeof(name), dev));
	return !strcmp(name, "CUDA driver double");
}

/* The program's arguments, for a fresh case's process. */
static int nargs;
static char **args;

/* This program again with its arguments and "-c NAME", the case's
 * settings added to its environment; its wait status, or T_TIMED_OUT
 * where the case has a limit and passed it. */
static int fresh(const struct t_case *c)
{
	double limit = c->limit_s > 0 ? c->limit_s : 3 * t_wait_s() + 30;
	double end = t_now() + limit;
	char *argv[nargs + 3], wait[64];
	pid_t pid;
	int st;

	memcpy(argv, args, nargs * sizeof(*argv));
	argv[nargs] = "-c";
	argv[nargs + 1] = (char *) c->name;
	argv[nargs + 2] = NULL;
	/* Failure may be "no completion": do not wait long for it. */
	if (c->wait_s && t_wait_s() > c->wait_s)
		snprintf(wait, sizeof(wait), "HMEMLOOP_TEST_WAIT=%g",
			 c->wait_s);
	else
		wait[0] = '\0';
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	t_assert(pid >= 0, "fork");
	if (!pid) {
		putenv(FRESH_VAR "=1");
		for (int i = 0; i < 2 && c->env[i]; i++)
			putenv((char *) c->env[i]);
		if (wait[0])
			putenv(wait);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (t_now() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			if (c->limit_s > 0)
				return T_TIMED_OUT;
			t_fail("%s: its process did not end in %.0f s", c->name,
			       limit);
		}
		usleep(10000);
	}
	return st;
}

static const struct t_case *current;

int t_arg(void)
{
	return current ? current->arg : 0;
}

const char *t_case_name(void)
{
	return current ? current->name : NULL;
}

void t_run_cases(const struct t_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct t_case *c = &cases[i];
		int st;

		if (!t_wanted(c->name))
			continue;
		ran++;
		if ((c->need & T_NEED_DOUBLE) && !t_cuda_double()) {
			t_case_skip("%s: it needs the CUDA driver double",
				    c->name);
			continue;
		}
		if ((c->need & T_NEED_SHIM) && !t_shim_enabled()) {
			t_case_skip("%s: hmemloop is not enabled", c->name);
			continue;
		}
		if (!c->fresh || t_fresh()) {
			double t0 = t_now();

			current = c;
			t_trace_case(c->name);
			c->run();
			t_trace_case_end();
			current = NULL;
			printf("%s: %.2f s\n", c->name, t_now() - t0);
			continue;
		}
		st = fresh(c);
		if (c->check) {
			c->check(c, st);
			continue;
		}
		t_assert(!WIFSIGNALED(st), "%s: killed by signal %d", c->name,
			 WTERMSIG(st));
		t_assert(!WEXITSTATUS(st), "%s: failed, status %d", c->name,
			 WEXITSTATUS(st));
	}
}

static void list(const struct t_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%s\n", cases[i].name);
}

/* -p, -c, -H, -l and the program's own options (a letter neither knows
 * fails); the arguments stay for a fresh case's process. */
static void read_opts(int argc, char **argv, const struct t_prog *p,
		      bool *listing)
{
	char all[64];
	int c;

	nargs = argc;
	args = argv;
	snprintf(all, sizeof(all), "p:c:Hl%s", p->opts ? p->opts : "");
	while ((c = getopt(argc, argv, all)) != -1) {
		if (c == 'p')
			t_prov = optarg;
		else if (c == 'c')
			t_only = optarg;
		else if (c == 'H')
			t_host = true;
		else if (c == 'l')
			*listing = true;
		else if (c == '?' || !p->opt)
			t_fail("usage: %s [-p PROVIDER] [-c CASE,...] [-H] "
			       "[-l]%s%s", argv[0], p->opts ? " and -" : "",
			       p->opts ? p->opts : "");
		else
			p->opt(c, optarg);
	}
	if (optind < argc)
		t_fail("%s: %s: not an option", argv[0], argv[optind]);
	setvbuf(stdout, NULL, _IOLBF, 0);
}

int t_main(int argc, char **argv, const struct t_prog *p)
{
	bool listing = false;

	read_opts(argc, argv, p, &listing);
	if (listing) {
		list(p->cases, p->n);
		list(p->more, p->nmore);
		return 0;
	}
	if (t_host && !(p->flags & T_HOST))
		t_skip("-H: this program runs on device memory only");
	if ((p->flags & T_CUDA) && !t_host)
		t_cuda_init();
	if (p->flags & T_TRACE)
		t_trace_on(true);
	if (p->setup)
		p->setup();
	if (p->run) {
		p->run();
	} else {
		t_run_cases(p->cases, p->n);
		t_run_cases(p->more, p->nmore);
	}
	if (t_only && !ran)
		t_fail("no case %s", t_only);
	if (p->teardown)
		p->teardown();
	return 0;
}

static void leave(int c, const char *arg)
{
	(void) c;
	(void) arg;
}

void t_init(int argc, char **argv, const char *opts)
{
	const struct t_prog p = { .opts = opts, .opt = leave };
	bool listing;

	read_opts(argc, argv, &p, &listing);
	optind = 1;
}
