/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * HMEMLOOP_STATS: counters per thread, summed and reported when the
 * process exits: on stderr (1), or as JSON in a new file (a path, %p the
 * process id). A thread that ends adds its block to the totals of ended
 * threads and frees it. A child of fork starts from nothing: its report
 * holds what it did, its parent's what the parent did.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hml_config.h"
#include "hml_log.h"
#include "hml_stats.h"

bool hml_stats_on;
__thread struct hml_stats *hml_stats_mine;

/* The live threads' blocks; ended, the counts of threads that ended and,
 * where no memory was left for a block, of threads that shared it. */
static struct hml_stats *all, ended;
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t key;

#define NCOUNTERS (offsetof(struct hml_stats, next) / sizeof(uint64_t))

static const char *const kinds[] = { "write", "read", "send", "tagged send" };
static const char *const kind_keys[] = { "write", "read", "send", "tsend" };
static const char *const dirs[] = { "D2D", "H2D", "D2H", "H2H" };
static const char *const errs[] = { "FI_EINVAL", "FI_EACCES", "FI_EIO",
				    "FI_ETRUNC", "FI_EOPNOTSUPP", "other" };
/* The router's reasons (hml_route.h): its logs say them, and these say
 * the provider's: the reasons an operation went to the provider. */
static const struct {
	const char *name, *key;
	bool passed;
} reasons[HML_REASONS] = {
	[HML_WHY_REMOTE] = { "not this process", "remote", true },
	[HML_WHY_FORBIDDEN] = { "CUDA forbidden", "cuda_forbidden", true },
	[HML_WHY_UNTRACKED] = { "receives not recorded", "untracked", true },
	[HML_WHY_EARLY] = { "early receives", "early", true },
	[HML_WHY_MANY] = { "too many buffers", "many", true },
	[HML_WHY_OVERSIZE] = { "inject over inject_size", "oversize", true },
	[HML_WHY_DEVICE] = { "device memory" },
	[HML_WHY_PAIR] = { "same-process pair" },
	[HML_WHY_INVALID] = { "invalid" },
	[HML_WHY_DEVICE_INJECT] = { "device inject over inject_size" },
};

const char *hml_reason_name(enum hml_reason r)
{
	return r < HML_REASONS ? reasons[r].name : "?";
}

static void add(struct hml_stats *t, const struct hml_stats *s)
{
	for (size_t i = 0; i < NCOUNTERS; i++)
		((uint64_t *) t)[i] += ((const uint64_t *) s)[i];
}

/* A thread's first count: its block, linked for the report. */
struct hml_stats *hml_stats_thread(void)
{
	struct hml_stats *s = calloc(1, sizeof(*s));

	if (!s)
		return &ended;	/* shared, and counts may be lost */
	pthread_mutex_lock(&all_lock);
	s->next = all;
	all = s;
	pthread_mutex_unlock(&all_lock);
	pthread_setspecific(key, s);
	return hml_stats_mine = s;
}

/* A thread ends: its counts join the ended threads'. */
static void thread_end(void *p)
{
	struct hml_stats *s = p, **at;

	pthread_mutex_lock(&all_lock);
	for (at = &all; *at != s; at = &(*at)->next)
		;
	*at = s->next;
	add(&ended, s);
	pthread_mutex_unlock(&all_lock);
	hml_stats_mine = NULL;
	free(s);
}

void hml_stat_done_add(enum hml_kind kind, const struct hml_side *src,
		       const struct hml_side *dst, size_t len)
{
	struct hml_stats *s;
	int dir;

	dir = src->device ? (dst->device ? HML_STAT_D2D : HML_STAT_D2H) :
			    (dst->device ? HML_STAT_H2D : HML_STAT_H2H);
	s = hml_stats();
	s->ops[kind][dir]++;
	s->bytes[kind][dir] += len;
}

void hml_stat_error_add(int err)
{
	hml_stats()->errors[err == FI_EINVAL ? HML_STAT_EINVAL :
			    err == FI_EACCES ? HML_STAT_EACCES :
			    err == FI_EIO ? HML_STAT_EIO :
			    err == FI_ETRUNC ? HML_STAT_ETRUNC :
			    err == FI_EOPNOTSUPP ? HML_STAT_EOPNOTSUPP :
			    HML_STAT_EOTHER]++;
}

void hml_stat_recv_add(bool tagged, const struct hml_side *src,
		       const struct hml_side *dst, size_t len, int err)
{
	/* A truncated message is delivered, cut: done, and an error. */
	if (!err || err == FI_ETRUNC)
		hml_stat_done_add(tagged ? HML_TSEND : HML_SEND, src,
				  dst, len);
	if (err)
		hml_stat_error_add(err);
}

/* The totals. Threads still running may count on meanwhile: their last
 * counts may be missed, never torn (aligned 64-bit words). */
static void sum(struct hml_stats *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_lock(&all_lock);
	add(t, &ended);
	for (struct hml_stats *s = all; s; s = s->next)
		add(t, s);
	pthread_mutex_unlock(&all_lock);
}

static void text(const struct hml_stats *t)
{
	char line[2048];
	int pid = getpid(), n, any = 0;

	n = snprintf(line, sizeof(line), "hmemloop: %d: stats: done here:", pid);
	for (int k = 0; k < HML_KINDS; k++)
		for (int d = 0; d < HML_STAT_DIRS; d++)
			if (t->ops[k][d] && n < (int) sizeof(line))
				n += snprintf(line + n, sizeof(line) - n,
					      "%s %s %s %lu (%lu bytes)",
					      any++ ? "," : "", kinds[k], dirs[d],
					      (unsigned long) t->ops[k][d],
					      (unsigned long) t->bytes[k][d]);
	fprintf(stderr, "%s%s\n", line, any ? "" : " nothing");
	fprintf(stderr, "hmemloop: %d: stats: errors:", pid);
	for (int e = 0; e < HML_STAT_ERRS; e++)
		fprintf(stderr, "%s %s %lu", e ? "," : "", errs[e],
			(unsigned long) t->errors[e]);
	fprintf(stderr, "\nhmemloop: %d: stats: messages staged %lu, receives "
		"taken back %lu, receives found held %lu\nhmemloop: %d: stats: "
		"passed through:", pid, (unsigned long) t->staged,
		(unsigned long) t->taken_back, (unsigned long) t->held, pid);
	for (int r = 0, any = 0; r < HML_REASONS; r++)
		if (reasons[r].passed)
			fprintf(stderr, "%s %s %lu", any++ ? "," : "",
				reasons[r].name, (unsigned long) t->passed[r]);
	fprintf(stderr, "\n");
}

static void json(const struct hml_stats *t, FILE *f)
{
	fprintf(f, "{\"pid\": %d, \"done\": {", (int) getpid());
	for (int k = 0; k < HML_KINDS; k++) {
		fprintf(f, "%s\"%s\": {", k ? ", " : "", kind_keys[k]);
		for (int d = 0; d < HML_STAT_DIRS; d++)
			fprintf(f, "%s\"%s\": {\"ops\": %lu, \"bytes\": %lu}",
				d ? ", " : "", dirs[d],
				(unsigned long) t->ops[k][d],
				(unsigned long) t->bytes[k][d]);
		fprintf(f, "}");
	}
	fprintf(f, "}, \"errors\": {");
	for (int e = 0; e < HML_STAT_ERRS; e++)
		fprintf(f, "%s\"%s\": %lu", e ? ", " : "", errs[e],
			(unsigned long) t->errors[e]);
	fprintf(f, "}, \"staged\": %lu, \"taken_back\": %lu, \"held\": %lu, "
		"\"passed\": {", (unsigned long) t->staged,
		(unsigned long) t->taken_back, (unsigned long) t->held);
	for (int r = 0, any = 0; r < HML_REASONS; r++)
		if (reasons[r].passed)
			fprintf(f, "%s\"%s\": %lu", any++ ? ", " : "",
				reasons[r].key, (unsigned long) t->passed[r]);
	fprintf(f, "}}\n");
}

/* The path, each %p the process id. */
static void path_of(char *buf, size_t n)
{
	const char *s = hml_config.stats;
	size_t len = 0;

	for (; *s && len + 1 < n; s++) {
		if (s[0] == '%' && s[1] == 'p') {
			len += snprintf(buf + len, n - len, "%d", (int) getpid());
			s++;
		} else {
			buf[len++] = *s;
		}
	}
	buf[len < n ? len : n - 1] = '\0';
}

static void report(void)
{
	struct hml_stats t;
	char path[4096];
	FILE *f;
	int fd;

	sum(&t);
	if (!strcmp(hml_config.stats, "1")) {
		text(&t);
		return;
	}
	path_of(path, sizeof(path));
	/* A new file, the user's alone: a name in a shared folder (/tmp) may
	 * be another user's file, or a link to one. */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	if (fd < 0 && errno == EEXIST) {
		hml_warn("HMEMLOOP_STATS: %s exists: not overwritten", path);
		return;
	}
	f = fd < 0 ? NULL : fdopen(fd, "w");
	if (!f) {
		hml_warn("HMEMLOOP_STATS: cannot write %s: %m", path);
		if (fd >= 0)
			close(fd);
		return;
	}
	json(&t, f);
	fclose(f);
}

/* The child has the forking thread only, and counts from nothing; the
 * lock may have been held by a thread the child does not have. */
static void child(void)
{
	struct hml_stats *mine = hml_stats_mine, *s, *next;

	pthread_mutex_init(&all_lock, NULL);
	for (s = all; s; s = next) {
		next = s->next;
		if (s != mine)
			free(s);
	}
	memset(&ended, 0, sizeof(ended));
	all = mine != &ended ? mine : NULL;
	if (all)
		memset(all, 0, sizeof(*all));
}

void hml_stats_start(void)
{
	if (!hml_config.enable || !strcmp(hml_config.stats, "0"))
		return;
	if (pthread_key_create(&key, thread_end)) {
		hml_warn("HMEMLOOP_STATS: no thread key: nothing is counted");
		return;
	}
	hml_stats_on = true;
	pthread_atfork(NULL, NULL, child);
	atexit(report);
}
