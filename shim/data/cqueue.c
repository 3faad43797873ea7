/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A CQ's queue of the shim's entries: in the order they happen, each in a
 * place taken before its operation began, written out in the CQ's format
 * and, for errors, in the layout of the application's API version. Which
 * entries an operation reports is completion.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "hml.h"
#include "hml_log.h"

static const size_t entry_sizes[] = {
	[FI_CQ_FORMAT_UNSPEC] = sizeof(struct fi_cq_entry),
	[FI_CQ_FORMAT_CONTEXT] = sizeof(struct fi_cq_entry),
	[FI_CQ_FORMAT_MSG] = sizeof(struct fi_cq_msg_entry),
	[FI_CQ_FORMAT_DATA] = sizeof(struct fi_cq_data_entry),
	[FI_CQ_FORMAT_TAGGED] = sizeof(struct fi_cq_tagged_entry),
};

size_t hml_cq_entry_size(enum fi_cq_format format)
{
	return format < sizeof(entry_sizes) / sizeof(entry_sizes[0]) ?
	       entry_sizes[format] : 0;
}

/*
 * The shim's entries on a CQ are at most its size: an operation of the
 * shim's takes a place for each entry it may report before anything moves,
 * and is refused with -FI_EAGAIN where there is none, so that no entry is
 * ever lost. Entries that end a receive already posted (filled or
 * cancelled) go in without one: the receives posted bound them. The
 * provider's own come in only where there is room (hml_cq_room).
 */
bool hml_cq_reserve(struct hml_cq *cq)
{
	bool ok;

	if (!cq)
		return true;
	pthread_mutex_lock(&cq->lock);
	ok = cq->count + cq->reserved < cq->size;
	cq->reserved += ok;
	pthread_mutex_unlock(&cq->lock);
	if (!ok)
		hml_debug("CQ %p holds %zu entries: a same-process operation "
			  "gets -FI_EAGAIN", cq->cq, cq->size);
	return ok;
}

void hml_cq_unreserve(struct hml_cq *cq)
{
	if (!cq)
		return;
	pthread_mutex_lock(&cq->lock);
	cq->reserved--;
	pthread_mutex_unlock(&cq->lock);
}

/* Room for entries that take no place: what the pump may bring. */
size_t hml_cq_room(struct hml_cq *cq)
{
	size_t n = __atomic_load_n(&cq->pending, __ATOMIC_ACQUIRE);

	return n < cq->size ? cq->size - n : 0;
}

static int push(struct hml_cq *cq, const struct hml_cqe *e, bool reserved)
{
	struct hml_cqe *ring;
	size_t cap;

	pthread_mutex_lock(&cq->lock);
	cq->reserved -= reserved;
	if (cq->count == cq->cap) {
		cap = cq->cap ? 2 * cq->cap : 64;
		ring = malloc(cap * sizeof(*ring));
		if (!ring) {
			pthread_mutex_unlock(&cq->lock);
			hml_warn("out of memory: a completion for context %p is "
				 "lost", e->op_context);
			return -FI_ENOMEM;
		}
		for (size_t i = 0; i < cq->count; i++)
			ring[i] = cq->ring[(cq->head + i) % cq->cap];
		free(cq->ring);
		cq->ring = ring;
		cq->cap = cap;
		cq->head = 0;
	}
	cq->ring[(cq->head + cq->count) % cq->cap] = *e;
	cq->count++;
	__atomic_store_n(&cq->pending, cq->count, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&cq->lock);
	hml_cq_wake(cq);
	return 0;
}

int hml_cq_push(struct hml_cq *cq, const struct hml_cqe *e)
{
	return push(cq, e, false);
}

/* An entry in the place hml_cq_reserve took. */
int hml_cq_push_reserved(struct hml_cq *cq, const struct hml_cqe *e)
{
	return push(cq, e, true);
}

static void pop_locked(struct hml_cq *cq)
{
	cq->head = (cq->head + 1) % cq->cap;
	cq->count--;
	__atomic_store_n(&cq->pending, cq->count, __ATOMIC_RELEASE);
}

static void fill(const struct hml_cq *cq, void *buf, const struct hml_cqe *e)
{
	switch (cq->format) {
	case FI_CQ_FORMAT_TAGGED:
		((struct fi_cq_tagged_entry *) buf)->tag = e->tag;
		/* fall through */
	case FI_CQ_FORMAT_DATA:
		((struct fi_cq_data_entry *) buf)->buf = e->buf;
		((struct fi_cq_data_entry *) buf)->data = e->data;
		/* fall through */
	case FI_CQ_FORMAT_MSG:
		((struct fi_cq_msg_entry *) buf)->flags = e->flags;
		((struct fi_cq_msg_entry *) buf)->len = e->len;
		/* fall through */
	default:
		((struct fi_cq_entry *) buf)->op_context = e->op_context;
	}
}

/* What a read hands out lives until the next read (fi_cq(3)). */
static void forget_err_data(struct hml_cq *cq)
{
	free(cq->err_data);
	cq->err_data = NULL;
}

ssize_t hml_cq_take(struct hml_cq *cq, void *buf, size_t count,
		    fi_addr_t *src)
{
	size_t n = 0;
	ssize_t ret;

	pthread_mutex_lock(&cq->lock);
	forget_err_data(cq);
	while (n < count && cq->count && !cq->ring[cq->head].err) {
		fill(cq, (char *) buf + n * cq->entry_size,
		     &cq->ring[cq->head]);
		if (src)
			src[n] = cq->ring[cq->head].src_addr;
		pop_locked(cq);
		n++;
	}
	/* An error first: the application must read it with readerr. */
	ret = !n && count && cq->count ? -FI_EAVAIL : (ssize_t) n;
	pthread_mutex_unlock(&cq->lock);
	return ret;
}

/* The fields every version's headers have lie where ours do. */
#define SAME_FIELD(f) _Static_assert(offsetof(struct hml_cq_err, f) ==	\
	offsetof(struct fi_cq_err_entry, f), #f " of fi_cq_err_entry moved")
SAME_FIELD(prov_errno);
SAME_FIELD(err_data);
SAME_FIELD(err_data_size);

size_t hml_cq_err_size(uint32_t api_version)
{
	if (FI_VERSION_LT(api_version, FI_VERSION(1, 5)))
		return offsetof(struct hml_cq_err, err_data_size);
	if (FI_VERSION_LT(api_version, FI_VERSION(1, 20)))
		return offsetof(struct hml_cq_err, src_addr);
	return sizeof(struct hml_cq_err);
}

/* Fill the application's error entry to the size of its API version's
 * layout, and not a byte further. */
static void fill_err(struct hml_cq *cq, struct hml_cq_err *buf,
		     const struct hml_cqe *e)
{
	size_t size = hml_cq_err_size(cq->domain->fabric->api_version);
	struct hml_cq_err out = { 0 };

	/* From API 1.5, err_data and err_data_size are also input. */
	memcpy(&out, buf, size);
	out.op_context = e->op_context;
	out.flags = e->flags;
	out.len = e->len;
	out.buf = e->buf;
	out.data = e->data;
	out.tag = e->tag;
	out.olen = e->olen;
	out.err = e->err;
	out.prov_errno = e->err_data || e->prov_errno ? e->prov_errno :
			 -e->err;
	out.src_addr = e->src_addr;
	/* Error data goes into the application's buffer if it gave one,
	 * else it gets ours, valid until its next read. */
	if (!e->err_data) {
		/* A buffer the application gave stays its own, empty. */
		if (out.err_data_size && out.err_data)
			out.err_data_size = 0;
		else
			out.err_data = NULL;
	} else if (out.err_data_size && out.err_data) {
		if (out.err_data_size > e->err_data_size)
			out.err_data_size = e->err_data_size;
		memcpy(out.err_data, e->err_data, out.err_data_size);
		free(e->err_data);
	} else {
		cq->err_data = e->err_data;
		out.err_data = e->err_data;
		out.err_data_size = e->err_data_size;
	}
	memcpy(buf, &out, size);
}

bool hml_cq_take_err(struct hml_cq *cq, struct hml_cq_err *buf)
{
	bool found = false;

	pthread_mutex_lock(&cq->lock);
	forget_err_data(cq);
	if (cq->count && cq->ring[cq->head].err) {
		fill_err(cq, buf, &cq->ring[cq->head]);
		pop_locked(cq);
		found = true;
	}
	pthread_mutex_unlock(&cq->lock);
	return found;
}
