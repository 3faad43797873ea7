/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The differential fuzzer (issue 15). Each sequence of random operations
 * (fuzz_seq.c) runs twice on host memory, in two child processes: through
 * hmemloop, which does every same-process operation itself, and on the
 * provider alone. Their reports must be the
 * same, byte for byte. Then once on device memory through hmemloop, which
 * checks the invariants itself. What each provider is not asked, and why,
 * is in fuzz_known.c.
 *
 *   fuzz [-p PROV] [-s SEED] [-n COUNT] [-t SECONDS] [-v] [-H]
 *
 * runs sequences SEED, SEED + 1, ... (default 1, or HMEMLOOP_FUZZ_SEED),
 * COUNT of them or for SECONDS (default 20, or HMEMLOOP_FUZZ_SECONDS),
 * in batches. -v prints every sequence's report (its trace); -H runs no
 * device sequences. A difference is printed with the line that reproduces
 * it: fuzz -p PROV -s SEED -n 1 -v. Run it through contrib/hmemloop: the
 * library is the one LD_PRELOAD names.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz.h"
#include "hmltest.h"

#define BATCH		20
#define SHOW_LINES	40

struct out {
	char *buf;
	size_t len;
	int status;
};

static char *lib;			/* libhmemloop, from LD_PRELOAD */
static char *preload_rest;		/* LD_PRELOAD without it */
static bool verbose;

static void find_lib(void)
{
	const char *env = getenv("LD_PRELOAD");
	char *copy, *tok, *save = NULL;
	size_t n = 0;

	t_assert(env && strstr(env, "libhmemloop"), "run through "
		 "contrib/hmemloop: LD_PRELOAD names no libhmemloop");
	copy = strdup(env);
	preload_rest = calloc(strlen(env) + 1, 1);
	t_assert(copy && preload_rest, "out of memory");
	for (tok = strtok_r(copy, " :", &save); tok;
	     tok = strtok_r(NULL, " :", &save)) {
		if (strstr(tok, "libhmemloop") && !lib) {
			lib = strdup(tok);
			continue;
		}
		n += sprintf(preload_rest + n, "%s%s", n ? " " : "", tok);
	}
	free(copy);
}

/* Run sequences seed .. seed + n - 1 in a child: mode "host" or
 * "device"; through hmemloop, or on the provider alone. */
static struct out child(const char *mode, bool shim, uint64_t seed,
			unsigned n)
{
	struct out o = { 0 };
	char s[32], c[32], *args[] = { "fuzz", "-p", (char *) t_prov, "-s", s,
				       "-n", c, NULL };
	size_t cap = 0;
	ssize_t got;
	int fd[2];
	pid_t pid;

	snprintf(s, sizeof(s), "%" PRIu64, seed);
	snprintf(c, sizeof(c), "%u", n);
	fflush(stdout);
	t_assert(!pipe(fd), "pipe");
	pid = fork();
	t_assert(pid >= 0, "fork");
	if (!pid) {
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		setenv("HMEMLOOP_FUZZ_CHILD", mode, 1);
		if (!shim) {
			setenv("LD_PRELOAD", preload_rest, 1);
			unsetenv("HMEMLOOP_ENABLE");
		}
		execv("/proc/self/exe", args);
		_exit(127);
	}
	close(fd[1]);
	for (;;) {
		if (o.len + 4096 > cap) {
			cap = cap ? 2 * cap : 1 << 16;
			o.buf = realloc(o.buf, cap + 1);
			t_assert(o.buf, "out of memory");
		}
		got = read(fd[0], o.buf + o.len, cap - o.len);
		if (got <= 0)
			break;
		o.len += got;
	}
	o.buf[o.len] = '\0';
	close(fd[0]);
	t_assert(waitpid(pid, &o.status, 0) == pid, "waitpid");
	return o;
}

/* Sequence seed's report in o: from "seq S" to "end S" whole, or NULL
 * (*len 0) where the child never finished it. */
static const char *block(const struct out *o, uint64_t seed, size_t *len)
{
	char head[48], tail[48];
	const char *b, *e;

	snprintf(head, sizeof(head), "seq %" PRIu64 "\n", seed);
	snprintf(tail, sizeof(tail), "end %" PRIu64 "\n", seed);
	*len = 0;
	if (!(b = strstr(o->buf, head)) || !(e = strstr(b, tail)))
		return NULL;
	*len = e + strlen(tail) - b;
	return b;
}

static const char *next_line(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', end - p);

	return nl ? nl + 1 : end;
}

/* Where two reports part: diff's lines, "<" through hmemloop, ">" alone. */
static void show_diff(const char *a, size_t alen, const char *b, size_t blen)
{
	char fa[] = "/tmp/hml-fuzz-XXXXXX", fb[] = "/tmp/hml-fuzz-XXXXXX";
	char cmd[128];
	int da = mkstemp(fa), db = mkstemp(fb);

	t_assert(da >= 0 && db >= 0, "mkstemp");
	t_assert(write(da, a, alen) == (ssize_t) alen &&
		 write(db, b, blen) == (ssize_t) blen, "write");
	close(da);
	close(db);
	snprintf(cmd, sizeof(cmd), "diff %s %s | head -n %d | sed 's/^/  /'",
		 fa, fb, SHOW_LINES);
	fflush(stdout);
	if (system(cmd) < 0)
		printf("  (diff did not run)\n");
	unlink(fa);
	unlink(fb);
}

static const char *how(int status)
{
	static char s[64];

	if (WIFSIGNALED(status))
		snprintf(s, sizeof(s), "killed by signal %d",
			 WTERMSIG(status));
	else
		snprintf(s, sizeof(s), "exit %d", WEXITSTATUS(status));
	return s;
}

static unsigned count_ops(const char *b, size_t len)
{
	unsigned n = 0;

	for (const char *p = b; p < b + len; p = next_line(p, b + len))
		n += !strncmp(p, "op ", 3);
	return n;
}

static struct {
	unsigned seqs, ops, diffs, prov_died, dev_seqs, dev_fails;
} tally;

static void reproduce(uint64_t seed)
{
	printf("  reproduce: contrib/hmemloop tests/fuzz -p '%s' -s %" PRIu64
	       " -n 1 -v\n", t_prov, seed);
}

/* Compare a batch; the next seed to run. */
static uint64_t compare(const struct out *shim, const struct out *alone,
			uint64_t seed, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t s = seed + i;
		size_t al, bl;
		const char *a = block(shim, s, &al), *b = block(alone, s, &bl);

		if (!b) {
			printf("fuzz: seed %" PRIu64 ": the provider alone "
			       "died (%s)%s: the provider's fault, not "
			       "compared\n", s, how(alone->status),
			       a ? "" : ", and through hmemloop");
			tally.prov_died++;
			return s + 1;
		}
		if (!a) {
			printf("fuzz: seed %" PRIu64 ": DIED through hmemloop "
			       "(%s), not without it\n", s, how(shim->status));
			reproduce(s);
			tally.diffs++;
			return s + 1;
		}
		tally.seqs++;
		tally.ops += count_ops(a, al);
		if (verbose)
			printf("%.*s", (int) al, a);
		if (al == bl && !memcmp(a, b, al))
			continue;
		printf("fuzz: seed %" PRIu64 ": DIFFERS through hmemloop\n", s);
		show_diff(a, al, b, bl);
		reproduce(s);
		tally.diffs++;
	}
	return seed + n;
}

/* A batch on device memory: every sequence must end, invariants held. */
static bool device_batch(uint64_t seed, unsigned n)
{
	struct out d = child("device", true, seed, n);
	size_t len;

	if (WIFEXITED(d.status) && WEXITSTATUS(d.status) == T_SKIP) {
		printf("fuzz: no device sequences: %s", d.buf);
		free(d.buf);
		return false;
	}
	for (unsigned i = 0; i < n; i++) {
		const char *b = block(&d, seed + i, &len);

		if (b && (i < n - 1 || !d.status)) {
			tally.dev_seqs++;
			continue;
		}
		printf("fuzz: seed %" PRIu64 " on device memory: %s\n%s",
		       seed + i, how(d.status), d.buf + (d.len > 2000 ?
							 d.len - 2000 : 0));
		printf("  reproduce: contrib/hmemloop env HMEMLOOP_FUZZ_CHILD="
		       "device tests/fuzz -p '%s' -s %" PRIu64 " -n 1\n",
		       t_prov, seed + i);
		tally.dev_fails++;
		break;
	}
	free(d.buf);
	return true;
}

/* -s SEED, -n COUNT, -t SECONDS, -v; -H (t_host) no device sequences. */
static const char *seed_arg, *count_arg, *seconds_arg;

static void opt(int c, const char *arg)
{
	if (c == 's')
		seed_arg = arg;
	else if (c == 'n')
		count_arg = arg;
	else if (c == 't')
		seconds_arg = arg;
	else
		verbose = true;
}

/* Its own run, not a case: a child's report is compared byte for byte,
 * and a case's time would differ. */
static void fuzz(void)
{
	uint64_t seed = strtoull(seed_arg ? seed_arg :
				 t_env("HMEMLOOP_FUZZ_SEED"), NULL, 0);
	double seconds = seconds_arg ? atof(seconds_arg) :
			 t_env_num("HMEMLOOP_FUZZ_SECONDS"), end;
	unsigned count = count_arg ? strtoul(count_arg, NULL, 0) : 0;
	const char *mode = t_env("HMEMLOOP_FUZZ_CHILD");
	bool device = !t_host;
	unsigned done = 0;

	if (mode) {
		if (!strcmp(mode, "device"))
			t_cuda_init();
		exit(fz_run(seed, count ? count : 1, !strcmp(mode, "device")));
	}
	find_lib();
	fz_print_known();
	printf("fuzz: provider %s, seeds from %" PRIu64 ", %s\n", t_prov,
	       seed, count ? "a count" : "a time budget");
	end = t_now() + seconds;
	while (count ? done < count : t_now() < end) {
		unsigned n = count && count - done < BATCH ? count - done :
			     BATCH;
		struct out a = child("host", true, seed, n);
		struct out b = child("host", false, seed, n);
		uint64_t next;

		if (WIFEXITED(b.status) && WEXITSTATUS(b.status) == T_SKIP)
			t_skip("%s", b.buf);
		next = compare(&a, &b, seed, n);
		/* Every sequence ran: the children must still end well (a
		 * sanitizer reports at exit). */
		if (next == seed + n && (a.status || b.status)) {
			printf("fuzz: seeds %" PRIu64 " to %" PRIu64 ": a run "
			       "ended badly: through hmemloop %s, ", seed,
			       next - 1, how(a.status));
			printf("alone %s\n", how(b.status));
			tally.diffs++;
		}
		free(a.buf);
		free(b.buf);
		if (device)
			device = device_batch(seed, next - seed);
		done += next - seed;
		seed = next;
	}
	printf("fuzz: %s: %u sequences (%u operations) compared, %u "
	       "differences, %u where the provider alone died; device "
	       "memory: %u sequences, %u failed\n", t_prov, tally.seqs,
	       tally.ops, tally.diffs, tally.prov_died, tally.dev_seqs,
	       tally.dev_fails);
	if (tally.diffs || tally.dev_fails)
		exit(1);
}

static const struct t_case cases[] = {
	T_CASE("fuzz", fuzz),
};

T_MAIN(cases, .flags = T_HOST, .opts = "s:n:t:v", .opt = opt, .run = fuzz);
