/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The case runner every test program with cases shares: a table of named
 * cases, "-c NAME,..." to run some, a skip that says why, a case in a
 * process of its own (this program again) and what tells the CUDA driver
 * double from a GPU's driver.
 */
#include <signal.h>
#include <stdarg.h>
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
	return getenv(FRESH_VAR) != NULL;
}

void t_case_skip(const char *fmt, ...)
{
	va_list ap;

	printf("skip: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
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
	const char *env = getenv("HMEMLOOP_TEST_CUDA");
	char name[64] = "";
	CUdevice dev;

	if (env && !strcmp(env, "real"))
		return false;
	t_cu(cuDeviceGet(&dev, 0));
	t_cu(cuDeviceGetName(name, sizeof(name), dev));
	return !strcmp(name, "CUDA driver double");
}

int t_respawn(char *const args[], const char *const env[], double seconds)
{
	double end = t_now() + seconds;
	pid_t pid;
	int st;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	t_assert(pid >= 0, "fork");
	if (!pid) {
		for (int i = 0; env && env[i]; i++)
			putenv((char *) env[i]);
		execv("/proc/self/exe", args);
		_exit(127);
	}
	while (seconds > 0 && waitpid(pid, &st, WNOHANG) == 0) {
		if (t_now() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			t_fail("%s: the child did not end in time", args[0]);
		}
		usleep(10000);
	}
	if (seconds <= 0)
		t_assert(waitpid(pid, &st, 0) == pid, "waitpid");
	return st;
}

/* This program again as "-p PROVIDER -c NAME", with the case's settings. */
static int fresh(const struct t_case *c)
{
	char *args[] = { (char *) t_argv0, "-p", (char *) t_prov, "-c",
			 (char *) c->name, NULL };
	const char *env[4] = { FRESH_VAR "=1" };
	const char *w = getenv("HMEMLOOP_TEST_WAIT");
	char wait[64];
	int n = 1;

	for (int i = 0; i < 2 && c->env[i]; i++)
		env[n++] = c->env[i];
	/* Failure may be "no completion": do not wait long for it. */
	if (c->wait_s && (!w || atof(w) > c->wait_s)) {
		snprintf(wait, sizeof(wait), "HMEMLOOP_TEST_WAIT=%g", c->wait_s);
		env[n++] = wait;
	}
	return t_respawn(args, env, 3 * t_wait_s() + 30);
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

			t_trace_case(c->name);
			c->run();
			t_trace_case_end();
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

void t_cases_done(void)
{
	if (t_only && !ran)
		t_fail("no case %s", t_only);
}
