/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The streams copies go on. Each thread copies on streams of its own, one
 * per context, which never wait for the application's work
 * (CU_STREAM_NON_BLOCKING) nor for other threads' copies. A stream is
 * counted: its thread holds it until it exits, and each operation in
 * flight on it (hml_ticket, copy.c) until it is seen done, by whichever
 * thread looks; the last one destroys it.
 *
 * A stream is known by its context's ID, not its handle: a reset of the
 * device destroys the primary context's streams but keeps its handle, and
 * the driver crashes on a stream it destroyed (an H200, driver 580). The
 * context, retained again, has a new ID.
 */
#include <stdlib.h>
#include <string.h>

#include "hml_stream.h"

#define STREAMS 8

struct streams {
	unsigned long long id[STREAMS];	/* 0: a free slot */
	struct hml_stream *s[STREAMS];
};

static __thread struct streams streams;
static pthread_key_t streams_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

/* The child of a fork() is a new process: the parent's streams are not
 * its own. */
static void forked(void)
{
	memset(&streams, 0, sizeof(streams));
}

__attribute__((constructor)) static void stream_init(void)
{
	pthread_atfork(NULL, NULL, forked);
}

bool hml_stream_live(const struct hml_stream *s)
{
	unsigned long long id;

	return !hml_cu.ctx_get_id(s->ctx, &id) && id == s->id;
}

void hml_stream_put(struct hml_stream *s)
{
	struct hml_fail *f;

	if (__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL))
		return;
	while ((f = s->fails)) {
		s->fails = f->next;
		free(f);
	}
	pthread_mutex_destroy(&s->lock);
	/* Work still queued finishes; the driver frees the stream then. */
	if (hml_stream_live(s)) {
		for (int i = 0; i < HML_MARKS; i++)
			if (s->ev[i])
				hml_cu.event_destroy(s->ev[i]);
		hml_cu.stream_destroy(s->stream);
	}
	free(s);
}

static void destroy_streams(void *arg)
{
	struct streams *t = arg;

	for (int i = 0; i < STREAMS && t->id[i]; i++)
		hml_stream_put(t->s[i]);
}

static void make_key(void)
{
	pthread_key_create(&streams_key, destroy_streams);
}

CUresult hml_stream_for(CUcontext ctx, unsigned long long id,
			   struct hml_stream **stream)
{
	struct streams *t = &streams;
	struct hml_stream *s;
	CUresult r;
	int i;

	for (i = 0; i < STREAMS && t->id[i]; i++)
		if (t->id[i] == id) {
			*stream = t->s[i];
			return CUDA_SUCCESS;
		}
	s = calloc(1, sizeof(*s));
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = hml_cu.stream_create(&s->stream, CU_STREAM_NON_BLOCKING);
	if (r) {
		free(s);
		return r;
	}
	if (i == STREAMS) {
		/* More contexts than slots: the oldest goes. */
		hml_stream_put(t->s[0]);
		memmove(&t->id[0], &t->id[1], sizeof(t->id[0]) * (STREAMS - 1));
		memmove(&t->s[0], &t->s[1], sizeof(t->s[0]) * (STREAMS - 1));
		i = STREAMS - 1;
	}
	pthread_once(&key_once, make_key);
	pthread_setspecific(streams_key, t);
	pthread_mutex_init(&s->lock, NULL);
	s->ctx = ctx;
	s->id = id;
	s->refs = 1;
	t->id[i] = id;
	t->s[i] = s;
	*stream = s;
	return CUDA_SUCCESS;
}

