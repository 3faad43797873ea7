/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Every address vector of the process: an endpoint that closes leaves them
 * all, and one that is given a name (enabled, renamed) is looked for in
 * them, where its name may have gone in before it was this process's.
 */
#include "hml_av.h"

static pthread_mutex_t avs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hml_av *avs;

/* The child of a fork() has one thread, which may have been forked while
 * another held the lock. */
static void forked(void)
{
	pthread_mutex_init(&avs_lock, NULL);
}

__attribute__((constructor)) static void avs_init(void)
{
	pthread_atfork(NULL, NULL, forked);
}

void hml_av_list(struct hml_av *av)
{
	pthread_mutex_lock(&avs_lock);
	av->next_av = avs;
	avs = av;
	pthread_mutex_unlock(&avs_lock);
}

void hml_av_unlist(struct hml_av *av)
{
	pthread_mutex_lock(&avs_lock);
	for (struct hml_av **p = &avs; *p; p = &(*p)->next_av) {
		if (*p == av) {
			*p = av->next_av;
			break;
		}
	}
	pthread_mutex_unlock(&avs_lock);
}

/* An endpoint closes: it leaves every address vector, as an address's
 * verdict and as a source (its memory may be the next endpoint's). */
void hml_avs_forget(struct hml_ep *e)
{
	pthread_mutex_lock(&avs_lock);
	for (struct hml_av *av = avs; av; av = av->next_av) {
		hml_av_cache_forget(av, e);
		hml_av_locals_forget(av, e);
	}
	pthread_mutex_unlock(&avs_lock);
}

/* An endpoint of this process has its name now: the address vectors
 * that hold it learn so. */
void hml_avs_named(struct hml_ep *e)
{
	pthread_mutex_lock(&avs_lock);
	for (struct hml_av *av = avs; av; av = av->next_av)
		hml_av_learn(av, e);
	pthread_mutex_unlock(&avs_lock);
}
